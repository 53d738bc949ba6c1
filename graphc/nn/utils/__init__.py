"""torch.nn.utils, module for module: `clip_grad` (clip_grad_norm_ and its kin),
`convert_parameters` (parameters_to_vector, vector_to_parameters), `rnn`
(pad_sequence) and `weight_norms` (weight_norm and spectral_norm as forward pre-hooks,
torch's weight_norm and spectral_norm modules).

>>> import graphc.eager as ge
>>> from graphc import nn
>>> w = ge.tensor([3.0, 4.0], requires_grad=True)
>>> w.grad = ge.tensor([3.0, 4.0])
>>> nn.utils.clip_grad_norm_([w], max_norm=1.0)
tensor(5.)
>>> [round(g, 4) for g in w.grad.tolist()]
[0.6, 0.8]
"""

from graphc.nn.utils import rnn
from graphc.nn.utils.clip_grad import (
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from graphc.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from graphc.nn.utils.weight_norms import (
    remove_spectral_norm,
    remove_weight_norm,
    spectral_norm,
    weight_norm,
)

__all__ = [
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "get_total_norm",
    "parameters_to_vector",
    "remove_spectral_norm",
    "remove_weight_norm",
    "rnn",
    "spectral_norm",
    "vector_to_parameters",
    "weight_norm",
]
