"""L-BFGS with torch.optim.LBFGS's iteration (without a line search).

Unlike the other optimizers L-BFGS has no update rule per parameter: each `step(closure)`
runs up to `max_iter` iterations over all the parameters flattened into one vector,
calling the closure for the loss and gradients after each move, so it steps eagerly only
(a compiled training step, gc.compile_train_step, refuses it by name).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from graphc.eager import Tensor, enable_grad, from_numpy, no_grad
from graphc.ir.errors import GraphcError
from graphc.optim.optimizer import Optimizer, check_range


class LBFGS(Optimizer):
    """Limited-memory BFGS (Nocedal), torch.optim.LBFGS's iteration: the direction from
    the two-loop recursion over the last `history_size` curvature pairs (s, y) whose
    y . s > 1e-10, scaled by y . s / y . y; the first move lr * min(1, 1 / |g|_1), the
    next ones lr; it stops at `max_iter` iterations or `max_eval` closure calls, or when
    the largest gradient entry is at most `tolerance_grad`, or a move or the change of the
    loss is below `tolerance_change`. `line_search_fn="strong_wolfe"` is not supported.

    >>> import graphc.eager as ge
    >>> w = ge.tensor([3.0, -1.0], requires_grad=True)
    >>> opt = LBFGS([w], lr=1.0)
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = ((w - ge.tensor([1.0, 2.0])) ** 2).sum()
    ...     loss.backward()
    ...     return loss
    >>> _ = opt.step(closure)
    >>> [round(v, 4) for v in w.tolist()]   # a quadratic: solved within one step's iterations
    [1.0, 2.0]
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1.0,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ) -> None:
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        hyper = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad)
        hyper.update(tolerance_change=tolerance_change, history_size=history_size)
        hyper.update(line_search_fn=line_search_fn)
        super().__init__(params, hyper)
        if len(self.param_groups) != 1:
            raise GraphcError(
                "LBFGS: per-parameter options (several param groups) are not supported"
            )

    def check_group(self, group: Mapping[str, Any]) -> None:
        check_range("lr", group["lr"], 0.0)
        if group["line_search_fn"] is not None:
            raise GraphcError(
                f"LBFGS: line_search_fn={group['line_search_fn']!r} is not supported (graphc's "
                "LBFGS takes torch's steps without a line search: line_search_fn=None)"
            )

    def update(self, param: Any, grad: Any, state: dict, group: Mapping | None = None) -> Any:
        raise GraphcError(
            "LBFGS: its step calls a closure several times over all the parameters, so it "
            "has no update rule per parameter: step it eagerly with opt.step(closure), not "
            "in a compiled training step"
        )

    # -- the flat vector of every parameter ------------------------------------------------

    def _flat_grad(self) -> np.ndarray:
        parts = [
            np.zeros(int(np.prod(p.shape)), p.dtype) if p.grad is None else p.grad.numpy().ravel()
            for p in self.params
        ]
        return np.concatenate(parts)

    def _move(self, step: float, direction: np.ndarray) -> None:
        """Every parameter += step * its part of `direction`, in place."""
        offset = 0
        with no_grad():
            for p in self.params:
                size = int(np.prod(p.shape))
                part = direction[offset : offset + size].reshape(tuple(p.shape))
                p.copy_(from_numpy(p.detach().numpy() + part * p.dtype.type(step)))
                offset += size

    # -- state: torch's entries, kept with the first parameter -----------------------------

    def state_dict(self) -> dict[str, Any]:
        """torch's layout: the first parameter's state holds the iteration's memory."""
        memory = self.__dict__.get("_memory", {})
        state = {0: {k: _copied(v) for k, v in memory.items()}} if memory else {}
        group = {**self.param_groups[0], "params": list(range(len(self.params)))}
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        groups = list(state_dict["param_groups"])
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            raise GraphcError(
                f"LBFGS.load_state_dict: expected one param group of {len(self.params)} parameters"
            )
        trial = {**self.param_groups[0], **{k: v for k, v in groups[0].items() if k != "params"}}
        self.check_group(trial)
        self.param_groups[0].update(trial)
        entries = list(state_dict["state"].values())
        self.__dict__["_memory"] = {
            k: _as_numpy(v) for k, v in (entries[0] if entries else {}).items()
        }

    # -- stepping -------------------------------------------------------------------------

    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """Up to max_iter L-BFGS iterations; `closure` (required) clears the gradients,
        computes the loss, calls backward and returns the loss. Returns the first loss."""
        if closure is None:
            raise GraphcError("LBFGS.step needs a closure that reevaluates the loss")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        memory = self.__dict__.setdefault("_memory", {})
        memory.setdefault("func_evals", 0)
        memory.setdefault("n_iter", 0)

        with enable_grad():
            first_loss = closure()
        loss = float(first_loss)
        evals = 1
        memory["func_evals"] += 1
        flat_grad = self._flat_grad()
        if np.abs(flat_grad).max() <= tolerance_grad:
            return first_loss

        d, t = memory.get("d"), memory.get("t")
        old_dirs, old_stps = memory.get("old_dirs", []), memory.get("old_stps", [])
        ro, h_diag = memory.get("ro", []), memory.get("H_diag", 1.0)
        prev_flat_grad, prev_loss = memory.get("prev_flat_grad"), memory.get("prev_loss")
        dtype = flat_grad.dtype.type
        iterations = 0
        while iterations < max_iter:
            iterations += 1
            memory["n_iter"] += 1
            if memory["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro, h_diag = [], [], [], 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * dtype(t)
                ys = y.dot(s)
                if ys > 1e-10:  # a pair of positive curvature joins the memory
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0), old_stps.pop(0), ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / y.dot(y)
                # the two-loop recursion: d = -H g
                alphas = memory.setdefault("al", [None] * history_size)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    alphas[i] = old_stps[i].dot(q) * ro[i]
                    q = q - old_dirs[i] * alphas[i]
                d = r = q * h_diag
                for i in range(len(old_dirs)):
                    beta = old_dirs[i].dot(r) * ro[i]
                    r = r + old_stps[i] * (alphas[i] - beta)
                d = r
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            if memory["n_iter"] == 1:  # in the gradient's dtype, as torch's tensor arithmetic
                t = min(dtype(1.0), dtype(1.0) / np.abs(flat_grad).sum()) * lr
            else:
                t = lr
            if flat_grad.dot(d) > -tolerance_change:  # no descent along d
                break
            self._move(t, d)
            more_evals = 0
            if iterations != max_iter:
                with enable_grad():
                    loss = float(closure())
                flat_grad = self._flat_grad()
                more_evals = 1
            evals += more_evals
            memory["func_evals"] += more_evals
            if iterations == max_iter or evals >= max_eval:
                break
            if np.abs(flat_grad).max() <= tolerance_grad:
                break
            if np.abs(d * dtype(t)).max() <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break
        memory.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag)
        memory.update(prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return first_loss


def _copied(value: Any) -> Any:
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return np.array(value, copy=True) if isinstance(value, np.ndarray) else value


def _as_numpy(value: Any) -> Any:
    if isinstance(value, list):
        return [_as_numpy(v) for v in value]
    if isinstance(value, Tensor):
        return value.detach().numpy().copy()
    if hasattr(value, "numpy") and hasattr(value, "detach"):  # another library's tensor
        array = value.detach().numpy()
        return array.item() if array.ndim == 0 else array.copy()
    return value
