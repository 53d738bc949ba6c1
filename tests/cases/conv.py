"""Op cases: convolution and pooling (added to the table of tests/op_cases.py).

The references are written the slow, obvious way, independently of graphc's kernels
(which use im2col and kernel taps): convolutions as a sum over kernel offsets of
einsums on a zero-padded input, transposed convolutions as that sum scattered into an
uncropped output, pooling as a loop over output positions. Edge cases for every op:
1x1 kernels, a kernel as large as the input, groups = channels (depthwise), groups in
between, asymmetric padding, dilation 2, stride larger than the kernel, an empty batch.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import graphc as gc
from graphc.ir.registry import get_op
from graphc.ir.types import TensorType
from graphc.ops.dispatch import bind
from tests.op_cases import BUILDER_CASES, FLOAT, Arg, F, I, _case

CONV_TOL = {"rtol": 1e-5, "atol": 1e-5}  # float32 sums of tens of products


def _pair(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


def _pads(value: Any) -> tuple:
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    return items * 4 if len(items) == 1 else items * 2 if len(items) == 2 else items


def _out_size(
    size: int, k: int, s: int, before: int, after: int, d: int, ceil: bool = False
) -> int:
    room = size + before + after - d * (k - 1) - 1
    if not ceil:
        return room // s + 1
    length = -(-room // s) + 1
    return length - 1 if (length - 1) * s >= size + before else length


# -- convolution ----------------------------------------------------------------------------


def conv2d_ref(x: np.ndarray, w: np.ndarray, stride: Any = 1, padding: Any = 0,
               dilation: Any = 1, groups: int = 1) -> np.ndarray:  # fmt: skip
    (sh, sw), (dh, dw) = _pair(stride), _pair(dilation)
    top, left, bottom, right = _pads(padding)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, _, hp, wp = xp.shape
    out_ch, per, kh, kw = w.shape
    ho, wo = (hp - dh * (kh - 1) - 1) // sh + 1, (wp - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, out_ch, ho, wo))
    og = out_ch // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * per : (g + 1) * per, i * dh :: sh, j * dw :: sw][:, :, :ho, :wo]
                weight = w[g * og : (g + 1) * og, :, i, j].astype(np.float64)
                out[:, g * og : (g + 1) * og] += np.einsum("nchw,oc->nohw", patch, weight)
    return out.astype(np.result_type(x.dtype, w.dtype))


def conv_transpose2d_ref(x: np.ndarray, w: np.ndarray, stride: Any = 1, padding: Any = 0,
                         output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> np.ndarray:  # fmt: skip
    (sh, sw), (dh, dw), (eh, ew) = _pair(stride), _pair(dilation), _pair(output_padding)
    top, left, bottom, right = _pads(padding)
    n, in_ch, h, wd = x.shape
    _, og, kh, kw = w.shape
    per = in_ch // groups
    full_h, full_w = (h - 1) * sh + dh * (kh - 1) + 1, (wd - 1) * sw + dw * (kw - 1) + 1
    ho, wo = full_h - top - bottom + eh, full_w - left - right + ew
    full = np.zeros((n, og * groups, max(full_h, top + ho), max(full_w, left + wo)))
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                part = np.einsum("nchw,co->nohw", x[:, g * per : (g + 1) * per].astype(np.float64),
                                 w[g * per : (g + 1) * per, :, i, j].astype(np.float64))  # fmt: skip
                rows = slice(i * dh, i * dh + (h - 1) * sh + 1, sh)
                cols = slice(j * dw, j * dw + (wd - 1) * sw + 1, sw)
                full[:, g * og : (g + 1) * og, rows, cols] += part
    out = full[:, :, top : top + ho, left : left + wo]
    return out.astype(np.result_type(x.dtype, w.dtype))


CONV2D = {
    "basic": ((2, 3, 5, 5), (4, 3, 3, 3), {}),
    "1x1": ((2, 3, 4, 4), (5, 3, 1, 1), {}),
    "kernel_is_input": ((2, 2, 3, 4), (3, 2, 3, 4), {}),
    "depthwise": ((2, 4, 5, 5), (4, 1, 3, 3), {"groups": 4, "padding": 1}),
    "depthwise_multiplier": ((1, 2, 4, 4), (4, 1, 2, 2), {"groups": 2, "stride": 2}),
    "groups2": ((1, 4, 5, 4), (6, 2, 3, 2), {"groups": 2, "stride": (2, 1)}),
    "asym_pad": ((1, 2, 4, 5), (3, 2, 2, 3), {"padding": (1, 0, 2, 1)}),
    "dilation2": ((2, 2, 7, 6), (3, 2, 3, 2), {"dilation": 2, "padding": 2}),
    "stride_gt_kernel": ((2, 2, 7, 7), (3, 2, 2, 2), {"stride": 3}),
    "stride2_slack": ((1, 2, 6, 6), (2, 2, 3, 3), {"stride": 2, "padding": 1}),
    "mixed": ((1, 2, 7, 8), (2, 2, 3, 2), {"stride": (2, 3), "dilation": (1, 2), "padding": (0, 1, 1, 0)}),
    "same_3x3": ((1, 2, 5, 5), (2, 2, 3, 3), {"padding": 1}),
    "empty_batch": ((0, 2, 4, 4), (3, 2, 3, 3), {"padding": 1}),
}  # fmt: skip
for _label, (_xs, _ws, _attrs) in CONV2D.items():
    _case("conv2d", _label, lambda x, w, a=_attrs: gc.conv2d(x, w, **a), [F(*_xs), F(*_ws)],
          lambda x, w, a=_attrs: conv2d_ref(x, w, **a), **CONV_TOL)  # fmt: skip
_case("conv2d", "bias", lambda x, w, b: gc.conv2d(x, w, b, padding=(1, 0)),
      [F(2, 3, 4, 4), F(2, 3, 3, 3), F(2)],
      lambda x, w, b: conv2d_ref(x, w, padding=(1, 0)) + b[:, None, None], **CONV_TOL)  # fmt: skip
_case("conv2d", "f32_f64", lambda x, w: gc.conv2d(x, w, stride=2),
      [Arg((1, 2, 5, 5), "float32"), Arg((3, 2, 3, 3), "float64")],
      lambda x, w: conv2d_ref(x, w, stride=2), **CONV_TOL)  # fmt: skip

# the fused conv2d + per-channel bias + activation (made by numpy_fusion.fuse_conv_epilogue)
_ACTS = {
    None: lambda v: v,
    "relu": lambda v: np.maximum(v, 0),
    "tanh": np.tanh,
    "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
    "gelu": lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))),
}
CONV2D_EPILOGUE = {
    "bias_relu": ((2, 3, 5, 5), (4, 3, 3, 3), (4, 1, 1), "relu", {"padding": 1}),
    "bias_tanh_groups": ((1, 4, 5, 4), (6, 2, 3, 2), (6, 1, 1), "tanh", {"groups": 2, "stride": (2, 1)}),
    "bias_gelu_depthwise": ((2, 4, 5, 5), (4, 1, 3, 3), (4, 1, 1), "gelu", {"groups": 4, "padding": 1}),
    "sigmoid": ((2, 2, 4, 6), (3, 2, 3, 3), None, "sigmoid", {"dilation": (1, 2)}),
    "scalar_bias": ((1, 2, 4, 4), (3, 2, 2, 2), (1,), None, {"stride": 2}),
}  # fmt: skip
for _label, (_xs, _ws, _bs, _act, _attrs) in CONV2D_EPILOGUE.items():
    _fixed = {**_attrs, "bias": _bs is not None, "activation": _act}
    _case("conv2d_epilogue", _label,
          lambda *v, a=_fixed: bind("conv2d_epilogue", *v, **a),
          [F(*_xs), F(*_ws)] + ([F(*_bs)] if _bs else []),
          lambda x, w, *b, a=_attrs, f=_ACTS[_act]: f(conv2d_ref(x, w, **a) + sum(b)),
          **CONV_TOL)  # fmt: skip


# conv2d + an elementwise body (made by numpy_fusion.fuse_conv_body): a batch norm in eval
# mode with a residual and a ReLU, and a body whose inputs broadcast every way allowed
def _conv_body(conv: Any, *others: Any) -> gc.Graph:
    """relu((c - o0) * o1 + o2 + ...) over the convolution c, typed like the operands."""
    body = gc.Graph("body")
    with body:
        c = gc.placeholder("c", shape=conv.shape, dtype=conv.dtype)
        ps = [gc.placeholder(f"o{k}", shape=o.shape, dtype=o.dtype) for k, o in enumerate(others)]
        value = (c - ps[0]) * ps[1]
        for p in ps[2:]:
            value = value + p
        gc.output(gc.relu(value), name="out")
    return body


def _conv_fused(x: Any, w: Any, *others: Any, a: dict) -> Any:
    types = [TensorType(v.shape, v.dtype) for v in (x, w)]
    op = get_op("conv2d")
    try:
        conv = op.infer(*types, **op.canonicalize(*types, **{**op.attrs, **a}))
    except gc.ShapeError as exc:  # no body can be typed: the op would refuse the same way
        raise gc.ShapeError(f"conv2d_fused: {exc}") from None
    return bind("conv2d_fused", x, w, *others, body=_conv_body(conv, *others), **a)


CONV2D_FUSED = {
    "bn_residual": ((2, 3, 5, 5), (4, 3, 3, 3), [(4, 1, 1), (4, 1, 1), (2, 4, 5, 5)], {"padding": 1}),
    "stride_groups": ((3, 4, 6, 5), (6, 2, 3, 2), [(1, 6, 1, 1), (1,), (1, 1, 2, 2)], {"groups": 2, "stride": 2}),
    "dilation_rows": ((2, 2, 7, 6), (3, 2, 2, 3), [(3, 1, 1), (2, 3, 5, 2), (2, 1, 1, 1)], {"dilation": 2}),
    "depthwise": ((2, 3, 4, 4), (3, 1, 3, 3), [(3, 1, 1), (3, 1, 1)], {"groups": 3, "padding": 1}),
}  # fmt: skip
for _label, (_xs, _ws, _os, _attrs) in CONV2D_FUSED.items():
    _case("conv2d_fused", _label, lambda x, w, *o, a=_attrs: _conv_fused(x, w, *o, a=a),
          [F(*_xs), F(*_ws)] + [F(*o) for o in _os],
          lambda x, w, o0, o1, *rest, a=_attrs: np.maximum((conv2d_ref(x, w, **a) - o0) * o1 + sum(rest), 0),
          **CONV_TOL)  # fmt: skip

CONV_TRANSPOSE2D = {
    "basic": ((2, 3, 3, 3), (3, 2, 3, 3), {}),
    "stride2_outpad": ((1, 2, 3, 3), (2, 3, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
    "1x1": ((2, 3, 3, 4), (3, 2, 1, 1), {}),
    "depthwise": ((2, 4, 4, 4), (4, 1, 3, 3), {"groups": 4, "stride": 2}),
    "groups2": ((1, 4, 3, 3), (4, 3, 2, 2), {"groups": 2, "dilation": 2}),
    "asym_pad": ((1, 2, 4, 3), (2, 2, 3, 3), {"padding": (1, 0, 2, 1)}),
    "dilation2": ((2, 2, 3, 3), (2, 2, 3, 3), {"dilation": 2, "padding": 1}),
    "stride_gt_kernel": ((1, 2, 3, 3), (2, 2, 2, 2), {"stride": 3}),
    "outpad_past_kernel": ((1, 2, 3, 2), (2, 1, 2, 2), {"stride": 3, "output_padding": (2, 1)}),
    "kernel_is_output": ((2, 2, 1, 1), (2, 3, 3, 4), {}),
    "empty_batch": ((0, 2, 3, 3), (2, 3, 3, 3), {"stride": 2}),
}  # fmt: skip
for _label, (_xs, _ws, _attrs) in CONV_TRANSPOSE2D.items():
    _case("conv_transpose2d", _label, lambda x, w, a=_attrs: gc.conv_transpose2d(x, w, **a),
          [F(*_xs), F(*_ws)], lambda x, w, a=_attrs: conv_transpose2d_ref(x, w, **a),
          **CONV_TOL)  # fmt: skip
_case("conv_transpose2d", "bias", lambda x, w, b: gc.conv_transpose2d(x, w, b, stride=2),
      [F(1, 2, 3, 3), F(2, 3, 2, 2), F(3)],
      lambda x, w, b: conv_transpose2d_ref(x, w, stride=2) + b[:, None, None], **CONV_TOL)  # fmt: skip

# 1-D: builders over the 2-D ops on a unit height
CONV1D = {
    "basic": ((2, 3, 7), (4, 3, 3), {}),
    "stride_pad_dilation": ((2, 2, 9), (3, 2, 2), {"stride": 2, "padding": (1, 2), "dilation": 2}),
    "groups": ((1, 4, 6), (4, 2, 3), {"groups": 2, "padding": 1}),
    "same": ((1, 2, 6), (2, 2, 4), {"padding": "same"}),
}
for _label, (_xs, _ws, _attrs) in CONV1D.items():
    _case("conv1d", _label, lambda x, w, a=_attrs: gc.conv1d(x, w, **a), [F(*_xs), F(*_ws)],
          lambda x, w, a=_attrs: conv2d_ref(x[:, :, None], w[:, :, None], **_attrs_2d(a, w))[:, :, 0],
          table=BUILDER_CASES, **CONV_TOL)  # fmt: skip


def _attrs_2d(attrs: dict, w: np.ndarray) -> dict:
    """1-D attrs as those of the 2-D convolution on a unit height."""
    out = {k: (1, v) for k, v in attrs.items() if k in ("stride", "dilation")}
    if "groups" in attrs:
        out["groups"] = attrs["groups"]
    padding = attrs.get("padding", 0)
    if padding == "same":  # PyTorch: the odd one at the end
        total = attrs.get("dilation", 1) * (w.shape[2] - 1)
        padding = (total // 2, total - total // 2)
    left, right = _pair(padding)
    out["padding"] = (0, left, 0, right)
    return out


_case("conv_transpose1d", "stride_outpad", lambda x, w: gc.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1),
      [F(2, 3, 4), F(3, 2, 3)],
      lambda x, w: conv_transpose2d_ref(x[:, :, None], w[:, :, None], stride=(1, 2), padding=(0, 1),
                                        output_padding=(0, 1))[:, :, 0],
      table=BUILDER_CASES, **CONV_TOL)  # fmt: skip
_case("conv1d", "bias", lambda x, w, b: gc.conv1d(x, w, b, stride=2), [F(2, 3, 7), F(4, 3, 3), F(4)],
      lambda x, w, b: conv2d_ref(x[:, :, None], w[:, :, None], stride=(1, 2))[:, :, 0] + b[:, None],
      table=BUILDER_CASES, **CONV_TOL)  # fmt: skip

# -- pooling --------------------------------------------------------------------------------


def _windows(size: int, k: int, s: int, before: int, after: int, d: int, ceil: bool) -> list:
    """The input positions of each window along one axis (padding left out)."""
    length = _out_size(size, k, s, before, after, d, ceil)
    return [[y * s + i * d - before for i in range(k) if 0 <= y * s + i * d - before < size]
            for y in range(length)]  # fmt: skip


def _pool_windows(x: np.ndarray, kernel_size: Any, stride: Any = None, padding: Any = 0,
                  dilation: Any = 1, ceil_mode: bool = False) -> tuple[list, list]:  # fmt: skip
    (kh, kw), (dh, dw) = _pair(kernel_size), _pair(dilation)
    sh, sw = _pair(kernel_size if stride is None else stride)
    top, left, bottom, right = _pads(padding)
    rows = _windows(x.shape[2], kh, sh, top, bottom, dh, ceil_mode)
    cols = _windows(x.shape[3], kw, sw, left, right, dw, ceil_mode)
    return rows, cols


def max_pool2d_ref(x: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
    rows, cols = _pool_windows(x, *args, **kwargs)
    out = np.empty(x.shape[:2] + (len(rows), len(cols)), x.dtype)
    for y, r in enumerate(rows):
        for z, c in enumerate(cols):
            out[:, :, y, z] = x[:, :, r][:, :, :, c].max(axis=(2, 3))
    return out


def _argmax_ref(x: np.ndarray, *args: Any, **kwargs: Any) -> Any:
    """For each window: its positions, and where its first maximum is."""
    rows, cols = _pool_windows(x, *args, **kwargs)
    for y, r in enumerate(rows):
        for z, c in enumerate(cols):
            flat = x[:, :, r][:, :, :, c].reshape(x.shape[:2] + (-1,))
            first = np.argmax(flat, axis=-1)
            yield y, z, np.array(r)[first // len(c)], np.array(c)[first % len(c)]


def max_pool2d_backward_ref(ct: np.ndarray, x: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
    grad = np.zeros(x.shape, ct.dtype)
    n, c = np.indices(x.shape[:2])
    for y, z, r, q in _argmax_ref(x, *args, **kwargs):
        np.add.at(grad, (n, c, r, q), ct[:, :, y, z])
    return grad


def max_pool2d_select_ref(v: np.ndarray, x: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
    rows, cols = _pool_windows(x, *args, **kwargs)
    out = np.zeros(x.shape[:2] + (len(rows), len(cols)), v.dtype)
    n, c = np.indices(x.shape[:2])
    for y, z, r, q in _argmax_ref(x, *args, **kwargs):
        out[:, :, y, z] = v[n, c, r, q]
    return out


MAX_POOL2D = {
    "2x2": ((2, 3, 4, 6), {"kernel_size": 2}),
    "3x3_s1_p1": ((1, 2, 5, 5), {"kernel_size": 3, "stride": 1, "padding": 1}),
    "dilation2": ((1, 2, 7, 7), {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2}),
    "ceil": ((1, 2, 5, 5), {"kernel_size": 2, "ceil_mode": True}),
    "ceil_pad": ((1, 2, 6, 5), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    "asym_pad": ((1, 2, 5, 4), {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 0, 0, 1)}),
    "kernel_is_input": ((2, 2, 3, 4), {"kernel_size": (3, 4)}),
    "stride_gt_kernel": ((1, 2, 7, 7), {"kernel_size": 2, "stride": 3}),
    "1x1": ((1, 2, 3, 3), {"kernel_size": 1, "stride": 2}),
    "overlap": ((1, 1, 5, 5), {"kernel_size": 3, "stride": 1}),
}  # fmt: skip
for _label, (_xs, _attrs) in MAX_POOL2D.items():
    _case("max_pool2d", _label, lambda x, a=_attrs: gc.max_pool2d(x, **a), [F(*_xs)],
          lambda x, a=_attrs: max_pool2d_ref(x, **a))  # fmt: skip
_case("max_pool2d", "int", lambda x: gc.max_pool2d(x, 2, padding=1), [I(1, 2, 4, 5)],
      lambda x: max_pool2d_ref(x, 2, padding=1))  # fmt: skip
_TIES = Arg((1, 1, 3, 4), FLOAT, "fixed", value=[[[[1, 1, 2, 0], [1, 0, 2, 2], [3, 3, 3, 3]]]])
_case("max_pool2d", "ties", lambda x: gc.max_pool2d(x, 2, stride=1), [_TIES],
      lambda x: max_pool2d_ref(x, 2, stride=1))  # fmt: skip
# windows that keep every size (stride 1, padding = dilated kernel - 1), so the cases also
# build on symbolic dims; max_pool2d's own cases run these ops on the other geometries
ROUTED = {
    "3x3_s1_p1": ((1, 2, 5, 5), {"kernel_size": 3, "stride": 1, "padding": 1}),
    "dilation2": ((1, 2, 6, 5), {"kernel_size": 3, "stride": 1, "padding": 2, "dilation": 2}),
    "asym_pad": ((2, 1, 4, 5), {"kernel_size": (3, 2), "stride": 1, "padding": (1, 0, 1, 1)}),
}
for _label, (_xs, _attrs) in ROUTED.items():
    _pooled = tuple(len(w) for w in _pool_windows(np.zeros(_xs), **_attrs))
    _case("max_pool2d_backward", _label,
          lambda ct, x, a=_attrs: gc.max_pool2d_backward(ct, x, gc.max_pool2d(x, **a), **a),
          [F(*_xs[:2], *_pooled), F(*_xs)],
          lambda ct, x, a=_attrs: max_pool2d_backward_ref(ct, x, **a), grad=(True, False))  # fmt: skip
    _case("max_pool2d_select", _label,
          lambda v, x, a=_attrs: gc.max_pool2d_select(v, x, gc.max_pool2d(x, **a), **a),
          [F(*_xs), F(*_xs)], lambda v, x, a=_attrs: max_pool2d_select_ref(v, x, **a),
          grad=(True, False))  # fmt: skip
_case("max_pool2d_backward", "ties",
      lambda ct, x: gc.max_pool2d_backward(ct, x, gc.max_pool2d(x, 3, 1, 1), 3, 1, 1),
      [F(1, 1, 3, 4), _TIES], lambda ct, x: max_pool2d_backward_ref(ct, x, 3, 1, 1),
      grad=(True, False))  # fmt: skip


def _divisor(
    size: int, k: int, s: int, before: int, after: int, ceil: bool, include: bool
) -> np.ndarray:
    length = _out_size(size, k, s, before, after, 1, ceil)
    start = np.arange(length) * s - before
    end = np.minimum(start + k, size + after)
    return end - start if include else np.minimum(end, size) - np.maximum(start, 0)


def avg_pool2d_ref(x: np.ndarray, kernel_size: Any, stride: Any = None, padding: Any = 0,
                   ceil_mode: bool = False, count_include_pad: bool = True,
                   divisor_override: int | None = None) -> np.ndarray:  # fmt: skip
    rows, cols = _pool_windows(x, kernel_size, stride, padding, 1, ceil_mode)
    out = np.empty(x.shape[:2] + (len(rows), len(cols)), np.float64)
    for y, r in enumerate(rows):
        for z, c in enumerate(cols):
            out[:, :, y, z] = x[:, :, r][:, :, :, c].astype(np.float64).sum(axis=(2, 3))
    if divisor_override is not None:
        return (out / divisor_override).astype(x.dtype)
    (kh, kw), (sh, sw) = _pair(kernel_size), _pair(kernel_size if stride is None else stride)
    top, left, bottom, right = _pads(padding)
    dh = _divisor(x.shape[2], kh, sh, top, bottom, ceil_mode, count_include_pad)
    dw = _divisor(x.shape[3], kw, sw, left, right, ceil_mode, count_include_pad)
    return (out / np.multiply.outer(dh, dw)).astype(x.dtype)


AVG_POOL2D = {
    "2x2": ((2, 3, 4, 6), {"kernel_size": 2}),
    "3x3_pad_include": ((1, 2, 5, 5), {"kernel_size": 3, "stride": 1, "padding": 1}),
    "3x3_pad_exclude": ((1, 2, 5, 5), {"kernel_size": 3, "stride": 1, "padding": 1, "count_include_pad": False}),
    "ceil": ((1, 2, 5, 5), {"kernel_size": 2, "ceil_mode": True}),
    "ceil_pad_exclude": ((1, 2, 6, 5), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}),
    "asym_pad": ((1, 2, 5, 4), {"kernel_size": (2, 3), "stride": (2, 1), "padding": (1, 0, 0, 1)}),
    "divisor_override": ((1, 2, 4, 4), {"kernel_size": 2, "padding": 1, "divisor_override": 3}),
    "kernel_is_input": ((2, 2, 3, 4), {"kernel_size": (3, 4)}),
    "stride_gt_kernel": ((1, 2, 7, 7), {"kernel_size": 2, "stride": 3}),
    "1x1": ((1, 2, 3, 3), {"kernel_size": 1, "stride": 2}),
}  # fmt: skip
for _label, (_xs, _attrs) in AVG_POOL2D.items():
    _case("avg_pool2d", _label, lambda x, a=_attrs: gc.avg_pool2d(x, **a), [F(*_xs)],
          lambda x, a=_attrs: avg_pool2d_ref(x, **a))  # fmt: skip


def _avg_adjoint_ref(ct: np.ndarray, size: tuple, **attrs: Any) -> np.ndarray:
    """The transpose of avg_pool2d_ref (a linear map), column by column."""
    grad = np.zeros(ct.shape[:2] + size)
    for position in np.ndindex(*size):
        unit = np.zeros((1, 1) + size)
        unit[(0, 0) + position] = 1.0
        pooled = avg_pool2d_ref(unit, **attrs)[0, 0]
        grad[(slice(None), slice(None)) + position] = np.einsum("nchw,hw->nc", ct, pooled)
    return grad.astype(ct.dtype)


for _label in ("3x3_pad_exclude", "ceil_pad_exclude", "asym_pad", "divisor_override"):
    _xs, _attrs = AVG_POOL2D[_label]
    _pooled = tuple(len(w) for w in _pool_windows(np.zeros(_xs), _attrs["kernel_size"],
                    _attrs.get("stride"), _attrs.get("padding", 0), 1, _attrs.get("ceil_mode", False)))  # fmt: skip
    _case("avg_pool2d_backward", _label,
          lambda ct, a=_attrs, s=_xs[2:]: gc.avg_pool2d_backward(ct, input_size=s, **a),
          [F(*_xs[:2], *_pooled)], lambda ct, a=_attrs, s=_xs[2:]: _avg_adjoint_ref(ct, s, **a))  # fmt: skip


def adaptive_avg_pool2d_ref(x: np.ndarray, output_size: Any) -> np.ndarray:
    oh, ow = (d if s is None else s for s, d in zip(_pair(output_size), x.shape[2:]))
    h, w = x.shape[2:]
    out = np.empty(x.shape[:2] + (oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            rows = slice(i * h // oh, -(-(i + 1) * h // oh))
            cols = slice(j * w // ow, -(-(j + 1) * w // ow))
            out[:, :, i, j] = x[:, :, rows, cols].mean(axis=(2, 3))
    return out


for _label, _xs, _size in [("uneven", (2, 3, 5, 7), (3, 2)), ("even", (1, 2, 6, 4), (3, 2)),
                           ("keep_w", (1, 2, 5, 4), (2, None)), ("global", (2, 3, 4, 5), 1),
                           ("upsample", (1, 2, 2, 3), (3, 4))]:  # fmt: skip
    _case("adaptive_avg_pool2d", _label, lambda x, s=_size: gc.adaptive_avg_pool2d(x, s), [F(*_xs)],
          lambda x, s=_size: adaptive_avg_pool2d_ref(x, s), table=BUILDER_CASES, **CONV_TOL)  # fmt: skip
_case("global_avg_pool2d", "4d", gc.global_avg_pool2d, [F(2, 3, 4, 5)],
      lambda x: x.mean(axis=(2, 3), keepdims=True), table=BUILDER_CASES, **CONV_TOL)  # fmt: skip
