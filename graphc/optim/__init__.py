"""graphc.optim: optimizers whose one update rule runs eagerly and inside compiled steps.

>>> import graphc.eager as ge
>>> from graphc import optim
>>> w = ge.tensor([3.0], requires_grad=True)
>>> opt = optim.SGD([w], lr=0.5, momentum=0.9)
>>> for _ in range(2):
...     opt.zero_grad(); (w * w).sum().backward(); opt.step()
>>> w
tensor([-2.7000], requires_grad=True)
"""

from graphc.optim import lr_scheduler, swa_utils
from graphc.optim.adadelta import Adadelta
from graphc.optim.adagrad import Adagrad
from graphc.optim.adam import Adam, AdamW
from graphc.optim.adamax import Adamax
from graphc.optim.lbfgs import LBFGS
from graphc.optim.nadam import NAdam
from graphc.optim.optimizer import Optimizer
from graphc.optim.radam import RAdam
from graphc.optim.rmsprop import RMSprop
from graphc.optim.rprop import Rprop
from graphc.optim.sgd import SGD
from graphc.optim.train_step import StaleTrainStepError, TrainStep, compile_train_step
