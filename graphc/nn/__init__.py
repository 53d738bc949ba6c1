"""graphc.nn: layers and losses that run eagerly and trace into graphs.

>>> import graphc.eager as ge
>>> from graphc import nn
>>> model = nn.Sequential(nn.Linear(3, 4, generator=0), nn.Tanh(), nn.Linear(4, 1, generator=1))
>>> nn.MSELoss()(model(ge.ones(5, 3)), ge.zeros(5, 1)).shape
()
"""

from graphc.nn import functional, init, utils
from graphc.nn.activation import *
from graphc.nn.attention import *
from graphc.nn.containers import *
from graphc.nn.conv import *
from graphc.nn.distance import *
from graphc.nn.layers import Bilinear, Identity, Linear, ReLU, Sigmoid, Tanh
from graphc.nn.loss import *
from graphc.nn.module import IncompatibleKeys, Module
from graphc.nn.norm import *
from graphc.nn.padding import *
from graphc.nn.parameter import Buffer, Parameter
from graphc.nn.patches import *
from graphc.nn.recurrent import *
from graphc.nn.regularization import *
from graphc.nn.shuffle import *
from graphc.nn.sparse import *
from graphc.nn.transformer import *
