"""The standard suite: PyTorch's instruction-count suite plus groups users care about now.

Sizes are tiny on purpose for most groups: these benchmarks track framework
overhead (dispatch, allocation, autograd bookkeeping, Python binding cost),
which small inputs expose and large ones hide behind kernel time. The
"MatMul / Linear" and "Attention" groups add realistic sizes where kernel time
matters too.
"""

from __future__ import annotations

from benchkit.define.api import GroupedModules, GroupedSetup, GroupedStmts, GroupedVariants, parse_stmts

# -- shared setups ---------------------------------------------------------------

_ADD_ONE = "def add_one(t):\n    return t + 1\nx = torch.ones(4, 4)\n"


def _ones(shape: tuple[int, ...]) -> GroupedSetup:
    dims = ", ".join(map(str, shape))
    return GroupedSetup(f"x = torch.ones(({dims},))", f"auto x = torch::ones({{{dims}}});")


SMALL_2D, SMALL_3D, SMALL_4D = _ones((4, 4)), _ones((4, 4, 4)), _ones((4, 4, 4, 4))

MIXED = GroupedSetup(
    *parse_stmts(r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    torch.manual_seed(1381023)               | torch::manual_seed(1381023);
    x = torch.rand((4, 4))                   | auto x = torch::rand({4, 4});
    y_float = torch.ones((4, 4))             | auto y_float = torch::ones({4, 4});
    y_int = torch.ones((4, 4),               | auto y_int = torch::ones({4, 4}, at::kInt);
        dtype=torch.int32)                   |
""")
)

INDEXING = GroupedSetup(
    *parse_stmts(r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
                                             | using namespace torch::indexing;
    torch.manual_seed(66261034)              | torch::manual_seed(66261034);
    x = torch.randn(1, 1, 1)                 | auto x = torch::randn({1, 1, 1});
    y = torch.randn(1, 1, 1)                 | auto y = torch::randn({1, 1, 1});
    a = torch.zeros(100, 100, 1, 1, 1)       | auto a = torch::zeros({100, 100, 1, 1, 1});
    b = torch.arange(100).long().flip(0)     | auto b = torch::arange(0, 100,
                                             |     torch::TensorOptions().dtype(torch::kLong)).flip(0);
""")
)

MESOSCALE = GroupedSetup(
    *parse_stmts(r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    x = torch.ones((4, 4))                   | auto x = torch::ones({4, 4});
    y = torch.ones((4, 4))                   | auto y = torch::ones({4, 4});
    bias = torch.ones((1,))                  | auto bias = torch::ones({1});
    eye_4 = torch.eye(4)                     | auto eye_4 = torch::eye(4);
""")
)

TRAINING = GroupedSetup(
    *parse_stmts(r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    x = torch.ones((1,))                     | auto x = torch::ones({1});
    y = torch.ones((1,))                     | auto y = torch::ones({1});
    w0 = torch.ones(1, requires_grad=True)   | auto w0 = torch::ones({1}).set_requires_grad(true);
    w1 = torch.ones(1, requires_grad=True)   | auto w1 = torch::ones({1}).set_requires_grad(true);
    w2 = torch.ones(2, requires_grad=True)   | auto w2 = torch::ones({2}).set_requires_grad(true);
""")
)


def _matmul_setup(m: int, k: int, n: int) -> GroupedSetup:
    return GroupedSetup(
        f"torch.manual_seed(0)\na = torch.randn({m}, {k})\n"
        f"w = torch.randn({n}, {k}, requires_grad=True)\nbias = torch.randn({n}, requires_grad=True)",
        f"torch::manual_seed(0);\nauto a = torch::randn({{{m}, {k}}});\n"
        f"auto w = torch::randn({{{n}, {k}}}).set_requires_grad(true);\n"
        f"auto bias = torch::randn({{{n}}}).set_requires_grad(true);",
    )


def _attention_setup(batch: int, heads: int, seq: int, dim: int) -> GroupedSetup:
    shape_py, shape_cpp = f"({batch}, {heads}, {seq}, {dim})", f"{{{batch}, {heads}, {seq}, {dim}}}"
    return GroupedSetup(
        "torch.manual_seed(0)\n"
        + "\n".join(f"{n} = torch.randn({shape_py}, requires_grad=True)" for n in "qkv"),
        "torch::manual_seed(0);\n"
        + "\n".join(f"auto {n} = torch::randn({shape_cpp}).set_requires_grad(true);" for n in "qkv"),
    )


def _pair(py: str, cpp: str, setup: GroupedSetup, **kwargs: object):  # type: ignore[no-untyped-def]
    return GroupedStmts(py, cpp, setup=setup, **kwargs)  # type: ignore[arg-type]


# Python index expression -> the same index in C++'s torch::indexing API.
_INDEX_EXPRESSIONS = (
    ("[0]", "{0}"),
    ("[0, 0]", "{0, 0}"),
    ("[0, 0, 0]", "{0, 0, 0}"),
    ("[...]", '{"..."}'),
    ("[:]", "{Slice(None, None, None)}"),
    ("[None]", "{None}"),
    ("[False]", "{false}"),
    ("[True]", "{true}"),
)

# (setup, scriptable, Python constructor, C++ constructor)
_MODULES = (
    (SMALL_4D, True, "BatchNorm2d(4)", "BatchNorm2d(4)"),
    (SMALL_4D, True, "GroupNorm(2, 4)", "GroupNorm(2, 4)"),
    (SMALL_4D, True, "LayerNorm(4)", "LayerNorm(torch::nn::LayerNormOptions({4}))"),
    (SMALL_3D, True, "Conv1d(4, 4, 1)", "Conv1d(4, 4, 1)"),
    (SMALL_4D, True, "Conv2d(4, 4, 1)", "Conv2d(4, 4, 1)"),
    (SMALL_4D, True, "MaxPool2d(2)", "MaxPool2d(2)"),
    (SMALL_2D, True, "ReLU()", "ReLU()"),
    (SMALL_2D, True, "Sigmoid()", "Sigmoid()"),
    (SMALL_4D, True, "Linear(4, 2)", "Linear(4, 2)"),
    # LSTM returns a tuple, which the derived TorchScript wrapper cannot express.
    (SMALL_3D, False, "LSTM(4, 2)", "LSTM(4, 2)"),
)


BENCHMARKS = {
    "empty": {
        "no allocation": GroupedStmts("torch.empty(())", "torch::empty({0});"),
        "with allocation": GroupedStmts("torch.empty((1,))", "torch::empty({1});"),
    },
    ("Pointwise", "Math"): {
        "add": {
            "Tensor-Scalar": _pair("x += 1.0", "x += 1.0;", MIXED),
            "Tensor-Tensor": _pair(
                "x += y_float", "x += y_float;", MIXED, signature="f(x, y_float) -> None", torchscript=True
            ),
            "Tensor-Tensor (type promotion)": _pair("x += y_int", "x += y_int;", MIXED),
            "Tensor-Tensor (out of place)": _pair("x + y_float", "x + y_float;", MIXED),
        },
        "multiply": _pair("x * y_float", "x * y_float;", MIXED),
        "equality": {
            "Tensor-Tensor": _pair("x == y_float", "x == y_float;", MIXED),
            "Tensor-Scalar": _pair("x == 1.0", "x == 1.0;", MIXED),
        },
    },
    ("Pointwise", "Data movement"): {
        "contiguous (trivial)": _pair("x.contiguous()", "x.contiguous();", SMALL_2D),
        "contiguous (non-trivial)": _pair("x.t().contiguous()", "x.t().contiguous();", SMALL_2D),
        "clone": _pair("x.clone()", "x.clone();", SMALL_2D),
        "copy_": _pair("x.copy_(y_float)", "x.copy_(y_float);", MIXED),
        "zero_": _pair("x.zero_()", "x.zero_();", SMALL_2D),
        "RNG": _pair("x.uniform_()", "x.uniform_();", SMALL_2D),
    },
    "Reduction": {
        "Max": _pair("x.max()", "x.max();", MIXED),
        "Sum": _pair("x.sum()", "x.sum();", MIXED),
        "Variance": _pair("x.var(0)", "x.var(0);", MIXED),
    },
    "Indexing": {
        py_index: GroupedStmts(
            f"x{py_index} = 1\nx{py_index} = y{py_index}",
            f"x.index_put_({cpp_index}, 1);\nx.index_put_({cpp_index}, y.index({cpp_index}));",
            INDEXING,
        )
        for py_index, cpp_index in _INDEX_EXPRESSIONS
    },
    ("Indexing", "Tensor index"): GroupedStmts(
        "a[b, None, ...] = 1",
        "a.index_put_({b, None, Ellipsis}, 1);",
        INDEXING,
        signature="f(a, b) -> None",
        torchscript=True,
    ),
    "Metadata and views": {
        "size": _pair("x.size()[0]", "x.sizes()[0];", SMALL_2D),
        "stride": _pair("x.stride(0)", "x.stride(0);", SMALL_2D),
        "as_strided": _pair(
            "torch.as_strided(x, (2, 3), (4, 1), 2)", "torch::as_strided(x, {2, 3}, {4, 1}, 2);", MIXED
        ),
        "select": _pair("x.select(1, 1)", "x.select(1, 1);", SMALL_2D),
        "unsqueeze": _pair("x.unsqueeze(0)", "x.unsqueeze(0);", SMALL_2D),
        "view": _pair("x.view(-1, 1)", "x.view({-1, 1});", SMALL_2D),
    },
    "Misc": {
        "resize_": _pair("x.resize_(0)\nx.resize_((4, 4))", "x.resize_(0);\nx.resize_({4, 4});", SMALL_2D),
        "Sort": _pair("torch.sort(x)", "torch::sort(x);", MIXED),
    },
    "MatMul": {
        "Broadcasting (matmul)": _pair(
            "z = torch.matmul(x, y_float)", "auto z = torch::matmul(x, y_float);", MIXED
        ),
        "Non-broadcasting (mm)": _pair("z = torch.mm(x, y_float)", "auto z = torch::mm(x, y_float);", MIXED),
    },
    "nn Modules": {
        py.split("(")[0]: GroupedModules(
            f"model = torch.nn.{py}",
            f"auto model = torch::nn::{cpp};",
            setup=setup,
            signature="f(x) -> y",
            torchscript=scriptable,
        )
        for setup, scriptable, py, cpp in _MODULES
    },
    "Mesoscale": {
        "MatMul-Bias-ReLU": GroupedStmts(
            *parse_stmts(r"""
                Python                                   | C++
                ---------------------------------------- | ----------------------------------------
                z0 = torch.mm(x, y) + bias               | auto z0 = torch::mm(x, y) + bias;
                z1 = torch.nn.functional.relu(z0)        | auto z1 = torch::nn::functional::relu(z0);
            """),
            MESOSCALE,
            signature="f(x, y, bias) -> z1",
            torchscript=True,
        ),
        "Off diagonal indices": GroupedStmts(
            *parse_stmts(r"""
                Python                                   | C++
                ---------------------------------------- | ----------------------------------------
                indices = torch.arange(eye_4.numel())    | auto indices = torch::arange(eye_4.numel());
                z = indices[eye_4.flatten() == 0]        | auto z = indices.index({eye_4.flatten() == 0});
            """),
            MESOSCALE,
            signature="f(eye_4) -> z",
            torchscript=True,
        ),
    },
    "training": {
        "simple": GroupedStmts(
            *parse_stmts(r"""
                Python                                   | C++
                ---------------------------------------- | ----------------------------------------
                a0 = torch.nn.functional.relu(x * w0)    | auto a0 = torch::nn::functional::relu(x * w0);
                y = a0 * w1                              | auto y = a0 * w1;
            """),
            TRAINING,
            num_threads=(1, 2),
            signature="f(x, w0, w1) -> y",
            torchscript=True,
            autograd=True,
        ),
        "ensemble": GroupedStmts(
            *parse_stmts(r"""
                Python                                   | C++
                ---------------------------------------- | ----------------------------------------
                a0 = torch.nn.functional.gelu(x * w0)    | auto a0 = torch::nn::functional::gelu(x * w0);
                a1 = torch.nn.functional.prelu(y, w1)    | auto a1 = torch::nn::functional::prelu(y, w1);
                z = torch.nn.functional.normalize(       | auto z = torch::nn::functional::normalize(
                    torch.cat([a0, a1]),                 |     torch::cat({a0, a1}),
                    p=2.0, dim=0,                        |     torch::nn::functional::NormalizeFuncOptions().p(2).dim(0)
                ).dot(w2)                                | ).dot(w2);
            """),
            TRAINING,
            num_threads=(1, 2),
            signature="f(x, y, w0, w1, w2) -> z",
            torchscript=True,
            autograd=True,
        ),
    },
    "InferenceMode": GroupedVariants(
        cpp_block=r"""
            // @Setup
            auto s = torch::ones({3, 3});  // a normal tensor
            c10::InferenceMode guard;
            auto x = torch::ones({3, 3});  // an inference tensor

            // @View
            torch::Tensor y = x.view({9});

            // @Inplace
            torch::Tensor y = x.mul_(x);

            // @Mixed
            torch::Tensor y = x + s;
        """
    ),
    # -- beyond the upstream suite -----------------------------------------------
    ("MatMul", "Linear"): {
        f"{m}x{k} @ {k}x{n}": GroupedStmts(
            "y = torch.nn.functional.linear(a, w, bias).sum()",
            "auto y = torch::nn::functional::linear(a, w, bias).sum();",
            _matmul_setup(m, k, n),
            signature="f(a, w, bias) -> y",
            torchscript=True,
            autograd=True,
            num_threads=threads,
        )
        for m, k, n, threads in ((1, 64, 64, 1), (32, 256, 256, (1, 2)), (256, 512, 512, (1, 2)))
    },
    ("MatMul", "sizes"): GroupedVariants(
        py_block="""
            # @setup
            torch.manual_seed(0)
            a16, b16 = torch.randn(16, 16), torch.randn(16, 16)
            a128, b128 = torch.randn(128, 128), torch.randn(128, 128)
            batch = torch.randn(8, 32, 32)
            # @mm
            torch.mm(a16, b16)
            torch.mm(a128, b128)
            # @bmm
            torch.bmm(batch, batch)
            # @addmm
            torch.addmm(b128, a128, b128)
        """,
        cpp_block="""
            // @setup
            torch::manual_seed(0);
            auto a16 = torch::randn({16, 16}), b16 = torch::randn({16, 16});
            auto a128 = torch::randn({128, 128}), b128 = torch::randn({128, 128});
            auto batch = torch::randn({8, 32, 32});
            // @mm
            torch::mm(a16, b16);
            torch::mm(a128, b128);
            // @bmm
            torch::bmm(batch, batch);
            // @addmm
            torch::addmm(b128, a128, b128);
        """,
    ),
    "Attention": {
        "sdpa (1x4x16x32)": GroupedStmts(
            "y = torch.nn.functional.scaled_dot_product_attention(q, k, v).sum()",
            "auto y = at::scaled_dot_product_attention(q, k, v).sum();",
            _attention_setup(1, 4, 16, 32),
            signature="f(q, k, v) -> y",
            autograd=True,
        ),
        "sdpa causal (2x8x128x64)": GroupedStmts(
            "y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).sum()",
            "auto y = at::scaled_dot_product_attention(q, k, v, {}, 0.0, true).sum();",
            _attention_setup(2, 8, 128, 64),
            signature="f(q, k, v) -> y",
            autograd=True,
            num_threads=(1, 2),
        ),
        "TransformerEncoderLayer": GroupedModules(
            "model = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,\n"
            "                                         dropout=0.0, batch_first=True).eval()",
            setup=GroupedSetup("torch.manual_seed(0)\nx = torch.randn(2, 16, 32)"),
            signature="f(x) -> y",
        ),
    },
    # Cost of calling an already-compiled function with guards that pass: what
    # every compiled model pays per step on top of its kernels. Each variant
    # compiles only its own backend: compiling is most of a case's setup time
    # (seconds natively, tens of seconds under valgrind).
    ("torch.compile", "call overhead"): {
        "plain Python function": GroupedStmts("add_one(x)", setup=GroupedSetup(_ADD_ONE)),
        "backend=eager": GroupedStmts(
            "compiled(x)",
            setup=GroupedSetup(_ADD_ONE + 'compiled = torch.compile(add_one, backend="eager")\ncompiled(x)'),
        ),
        "backend=inductor": GroupedStmts(
            "compiled(x)",
            setup=GroupedSetup(
                _ADD_ONE + 'compiled = torch.compile(add_one, backend="inductor")\ncompiled(x)'
            ),
        ),
    },
}
