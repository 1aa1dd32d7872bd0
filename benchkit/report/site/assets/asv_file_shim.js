// Lets asv's pages read their JSON when opened from file://, where browsers refuse
// XHR. `benchkit publish` writes a twin `<file>.json.js` next to every JSON file of
// the site; it calls benchkitJson(path, data). This transport answers asv's jQuery
// JSON requests from those scripts. Over http(s) it stays out of the way.
(function () {
  "use strict";
  if (window.location.protocol !== "file:" || !window.jQuery || window.benchkitJson) return;
  var waiting = {};

  // Requests may carry a percent-encoded path (graph folders hold spaces); the twins name the plain one.
  function plain(path) {
    try { return decodeURIComponent(path); } catch (e) { return path; }
  }

  window.benchkitJson = function (path, data) {
    path = plain(path);
    var callbacks = waiting[path] || [];
    delete waiting[path];
    callbacks.forEach(function (callback) { callback(data); });
  };

  jQuery.ajaxTransport("json", function (options) {
    var url = options.url.split("?")[0].split("#")[0];
    var path = plain(url);
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
        script.src = url + ".js";
        script.onerror = function () {
          if (done) return;
          done = true;
          delete waiting[path];
          complete(404, "not found");
        };
        script.onload = function () {
          script.remove();
          if (done) return;  // the twin answered while it ran
          done = true;  // it ran without answering this request: fail instead of waiting forever
          complete(500, "script twin did not provide " + path);
        };
        document.head.appendChild(script);
      },
      abort: function () {
        done = true;
        if (script) script.remove();
      },
    };
  });
})();
