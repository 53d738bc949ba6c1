"""Graph-to-graph passes; symbolic differentiation (autodiff) among them."""

from graphc.passes import control_ad as _control_ad  # noqa: F401 - control flow gradients
from graphc.passes.autodiff import gradients, split_backward
from graphc.passes.batchnorm import fold_batch_norm
from graphc.passes.cse import eliminate_common_subexpressions
from graphc.passes.dce import eliminate_dead_code
from graphc.passes.fold import fold_constants
from graphc.passes.gemm_rules import fold_sgd_updates
from graphc.passes.pipeline import LEVELS, optimize
from graphc.passes.recognize import recognize_layer_norm, recognize_softmax
from graphc.passes.report import OptimizationReport
from graphc.passes.simplify import scale_before_transposes, simplify, simplify_fast_math
from graphc.passes.vmap import vmap_graph
