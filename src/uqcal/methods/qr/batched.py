"""Many ``HeteroscedasticMLP``s trained as one stacked model (issue 53): the seeds of a job, and a Deep
Ensemble's members, side by side on a leading model axis.

Every model keeps its own parameters, minibatch orders and dropout masks; a step is Adam on the sum of the
models' losses, whose gradient with respect to one model's parameters is that model's own loss gradient, and
Adam is elementwise: each model follows the steps ``gaussian_nets.train_member`` takes alone. The hidden and
output layers are ``torch.baddbmm`` with a leading model axis (each model's slice is the ``nn.Linear`` product
of the same shapes), the input layer and the NeuralSort run model by model (where a batched kernel would round
differently), the spacing entropy is ``entropy.spacing_entropy`` row by row, and a model's dropout masks come
from its own seed's generator in the order ``nn.Dropout`` draws them.
"""

from __future__ import annotations

import math

import torch
import torch._dynamo  # noqa: F401  (an optimiser's first step imports it; here, before any timer: core/numerics.py)

from uqcal.methods.qr.entropy import QuantileRegularizer, neural_sort


class StackedMLPs:
    """The parameters of ``nets`` (same architecture) stacked on a leading model axis: ``weights[i]`` of shape
    (models, out, in), ``biases[i]`` (models, out), layers in the nets' order, the head last."""

    def __init__(self, nets: list):
        linears = [[m for m in net.modules() if isinstance(m, torch.nn.Linear)] for net in nets]
        self.weights = [torch.stack([layers[i].weight.detach() for layers in linears]).clone().requires_grad_(True)
                        for i in range(len(linears[0]))]
        self.biases = [torch.stack([layers[i].bias.detach() for layers in linears]).clone().requires_grad_(True)
                       for i in range(len(linears[0]))]
        self.min_std = nets[0].min_std
        self._linears = linears

    def parameters(self) -> list[torch.Tensor]:
        """Weights and biases in ``nn.Module`` order (layer by layer, weight then bias)."""
        return [t for pair in zip(self.weights, self.biases, strict=True) for t in pair]

    def forward(self, x: torch.Tensor, noises: list[torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(mu, sigma), each (models, n), of inputs x (models, n, d): ``HeteroscedasticMLP.forward`` per model;
        ``noises[i]`` (models, n, hidden) scales the i-th hidden layer's output as ``nn.Dropout`` does."""
        h = x
        for i, (weight, bias) in enumerate(zip(self.weights[:-1], self.biases[:-1], strict=True)):
            if i == 0:
                # The input layer model by model: the weight gradient x^T g of a (n, d) input with few features
                # takes another GEMM kernel in a bmm than in nn.Linear's mm, and rounds differently.
                h = torch.stack([torch.nn.functional.linear(*one) for one in zip(h, weight, bias, strict=True)])
            else:
                h = torch.baddbmm(bias[:, None, :], h, weight.transpose(1, 2))
            h = torch.relu(h)
            if noises is not None:
                h = h * noises[i]
        out = torch.baddbmm(self.biases[-1][:, None, :], h, self.weights[-1].transpose(1, 2))
        std = self.min_std + (1.0 - self.min_std) * torch.nn.functional.softplus(out[..., 1])
        return out[..., 0], std

    @torch.no_grad()
    def write_back(self) -> None:
        """Copy every model's trained parameters into its ``nn.Module``."""
        for model, layers in enumerate(self._linears):
            for layer, weight, bias in zip(layers, self.weights, self.biases, strict=True):
                layer.weight.copy_(weight[model])
                layer.bias.copy_(bias[model])


def stacked_nll(y: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """``entropy.gaussian_nll`` of each model: rows (models, n) -> (models,)."""
    return (torch.log(std) + 0.5 * ((y - mean) / std) ** 2).mean(dim=1) + 0.5 * math.log(2 * math.pi)


def stacked_penalty(regularizer: QuantileRegularizer, pit: torch.Tensor) -> torch.Tensor:
    """``QuantileRegularizer.penalty`` of each row of pit (models, n): -lam H, (models,)."""
    models, n = pit.shape
    if regularizer.lam == 0.0 or n < 2:
        return pit.new_zeros(models)
    from uqcal.methods.qr.entropy import spacing_k

    k = spacing_k(n, regularizer.k, regularizer.k_multiplier)
    if regularizer.sort == "hard":
        ordered = torch.sort(pit, dim=1).values
    else:
        # Model by model: one model's (n, n) relaxation stays in the cache, a stack of them does not (the same
        # arithmetic; measured ~20 % cheaper at 25 models of a 512 batch).
        ordered = torch.stack([neural_sort(row, regularizer.tau) for row in pit])
    spacings = ordered[:, k:] - ordered[:, :-k]
    floored = spacings + (regularizer.eps - spacings).clamp(min=0).detach()
    return -regularizer.lam * torch.log((n + 1) / k * floored).mean(dim=1)


def stacked_loss(stack: StackedMLPs, xb: torch.Tensor, yb: torch.Tensor, regularizer: QuantileRegularizer,
                 adversarial: str, noises) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``gaussian_nets.minibatch_loss`` of each model ((models,) loss, nll, penalty) for the adversarial modes
    ``none`` and ``fgsm_authors`` (``fgsm`` trains per seed)."""
    from uqcal.methods.qr.entropy import gaussian_pit

    mean, std = stack.forward(xb, noises)
    nll = stacked_nll(yb, mean, std)
    penalty = stacked_penalty(regularizer, gaussian_pit(yb, mean, std))
    if adversarial == "none":
        return nll + penalty, nll, penalty
    if adversarial == "fgsm_authors":
        return 2.0 * nll + 0.5 * penalty, nll, penalty
    raise ValueError(f"stacked training supports adversarial 'none' and 'fgsm_authors', got {adversarial!r}")


def train_stacked(nets: list, X: torch.Tensor, y: torch.Tensor, orders: torch.Tensor, params: dict,
                  regularizer: QuantileRegularizer,
                  dropout_generators: list[torch.Generator] | None) -> list[dict]:
    """``gaussian_nets.train_member`` of every net at once, in place.

    Parameters
    ----------
    nets : list of HeteroscedasticMLP
        The models (same architecture), trained in place.
    X : torch.Tensor of shape (models, n, d)
        Each model's standardised training inputs (the same n for all).
    y : torch.Tensor of shape (models, n)
        Each model's standardised training targets.
    orders : torch.Tensor of shape (models, epochs, n)
        Each model's minibatch order of every epoch (the permutations ``train_member`` draws).
    params : dict
        ``lr``, ``batch_size``, ``epochs``, ``adversarial`` and ``dropout`` are read.
    regularizer : QuantileRegularizer
        The loss NLL - lam H(PIT) (QR Eq. 7).
    dropout_generators : list of torch.Generator or None
        With dropout: each model's generator of its masks (the global stream its own run draws them from), one
        model per generator; None without dropout.

    Returns
    -------
    list of dict
        ``nll`` and ``penalty`` of each model's last minibatch.
    """
    stack = StackedMLPs(nets)
    optimiser = torch.optim.Adam(stack.parameters(), lr=params["lr"])
    models, n = y.shape
    batch_size, keep = int(params["batch_size"]), 1.0 - float(params["dropout"])
    hidden_layers = len(stack.weights) - 1
    rows = torch.arange(models, device=X.device)[:, None]
    nll = penalty = None
    for epoch in range(int(params["epochs"])):
        order = orders[:, epoch].to(X.device)
        for start in range(0, n, batch_size):
            index = order[:, start : start + batch_size]
            noises = None
            if dropout_generators is not None:
                # nn.Dropout on CPU: empty_like(h).bernoulli_(1 - p).div_(1 - p), layer by layer, per model
                shape = (index.shape[1], stack.weights[0].shape[1])
                per_model = [[torch.empty(shape, device="cpu").bernoulli_(keep, generator=g).div_(keep)
                              for _ in range(hidden_layers)] for g in dropout_generators]
                noises = [torch.stack([masks[i] for masks in per_model]).to(X.device) for i in range(hidden_layers)]
            loss, nll, penalty = stacked_loss(stack, X[rows, index], y[rows, index], regularizer,
                                              params["adversarial"], noises)
            optimiser.zero_grad()
            loss.sum().backward()
            optimiser.step()
    stack.write_back()
    if nll is None:
        return [{} for _ in nets]
    return [{"nll": float(a), "penalty": float(b)} for a, b in zip(nll.detach().cpu(), penalty.detach().cpu(),
                                                                  strict=True)]
