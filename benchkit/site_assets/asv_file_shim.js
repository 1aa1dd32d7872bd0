// Lets asv's pages read their JSON when opened from file://, where browsers refuse
// XHR. `benchkit publish` writes a twin `<file>.json.js` next to every JSON file of
// the site; it calls benchkitJson(path, data). This transport answers asv's jQuery
// JSON requests from those scripts. Over http(s) it stays out of the way.
(function () {
  "use strict";
  if (window.location.protocol !== "file:" || !window.jQuery || window.benchkitJson) return;
  var waiting = {};

  window.benchkitJson = function (path, data) {
    var callbacks = waiting[path] || [];
    delete waiting[path];
    callbacks.forEach(function (callback) { callback(data); });
  };

  jQuery.ajaxTransport("json", function (options) {
    var path = options.url.split("?")[0].split("#")[0];
    var script = null;
    var done = false;
    return {
      send: function (_headers, complete) {
        (waiting[path] = waiting[path] || []).push(function (data) {
          if (done) return;
          done = true;
          complete(200, "success", { json: data });
        });
        script = document.createElement("script");
        script.src = path + ".js";
        script.onerror = function () {
          if (done) return;
          done = true;
          delete waiting[path];
          complete(404, "not found");
        };
        script.onload = function () { script.remove(); };
        document.head.appendChild(script);
      },
      abort: function () {
        done = true;
        if (script) script.remove();
      },
    };
  });
})();
