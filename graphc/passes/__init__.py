"""Graph-to-graph passes; symbolic differentiation (autodiff) among them."""

from graphc.passes.autodiff import gradients, split_backward
