"""SICK-R / STS-B: a relatedness head trained on frozen sentence vectors.

The head sees u * v and |u - v| and predicts a distribution over the K integer scores of the
dataset's range; the prediction is its expectation. It is trained with Adam (learning rate 1e-3,
batch 64) on minibatches against the sparse target distribution of Tai et al., one jitted
`lax.scan` per epoch, and the parameters with the best dev Pearson are kept. Which head and loss
is a name of `HEADS`:

- "tai" (the default): Tai et al. (2015), a sigmoid hidden layer of 50
  (`jaxenc.tasks.heads.RelatednessHead`), KL(target || p) averaged over the batch.
- "senteval": SentEval's `RelatednessPytorch`, one linear layer and a softmax over
  [|u - v|, u * v] (`jaxenc.tasks.heads.LinearRelatednessHead`), the squared error of p against
  the target summed over the batch and the classes (its `nn.MSELoss` with size_average off).

When dev is read and when training stops is a `RelatednessSchedule` (`SCHEDULES`):

- "senteval" (the default): SentEval's `RelatednessPytorch.run` (the toolkit the encoders'
  papers evaluate with; the papers leave the schedule open): dev after every 50 epochs,
  at most 1000 epochs (while the epoch count is <= 1000, so the last block passes it), stop at
  the 4th evaluation without an improvement, counted over the whole run (SentEval's counter is
  never reset by an improvement).
- "epoch": dev after every epoch, stop 5 epochs after the best one, at most 100 epochs. On
  frozen codes epochs 2-6 may not beat epoch 1's dev Pearson although later epochs would, so
  this schedule may keep an epoch-1 head.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxenc.tasks.heads import LinearRelatednessHead, RelatednessHead, expected_score
from jaxenc.tasks.losses import kl_divergences, relatedness_target, squared_errors
from jaxenc.tasks.metrics import mean_squared_error, pearson, spearman

SEED = 1111

# One split: (u float32[N, D], v float32[N, D], gold scores float[N]).
PairSplit = tuple[np.ndarray, np.ndarray, np.ndarray]


def num_score_classes(score_range: tuple[float, float]) -> int:
    """K: the integer scores low, low + 1, ..., high."""
    low, high = score_range
    if low != int(low) or high != int(high) or high <= low:
        raise ValueError(f"score range {score_range} must span integers low < high")
    return int(high - low) + 1


def score_distribution(scores: np.ndarray, score_range: tuple[float, float]) -> jax.Array:
    """float32[N, K] Tai et al. target of scores in [low, high]: the class floor(y) gets
    floor(y) - y + 1, the class above y - floor(y) (class k holding score low + k)."""
    low, _ = score_range
    shifted = jnp.asarray(scores, jnp.float32) - low + 1.0  # scores 1..K, as the loss numbers them
    return relatedness_target(shifted, num_score_classes(score_range))


@dataclasses.dataclass(frozen=True)
class RelatednessSchedule:
    """When the head's dev Pearson is read and when training stops (module docstring)."""

    epochs_per_eval: int
    max_epochs: int
    patience: int  # evaluations without an improvement that stop training
    reset_on_improvement: bool  # False: the count runs over the whole training, as SentEval's
    last_block_may_pass_max: bool  # True: SentEval's `while nepoch <= maxepoch`


SCHEDULES = {
    "epoch": RelatednessSchedule(epochs_per_eval=1, max_epochs=100, patience=5,
                                 reset_on_improvement=True, last_block_may_pass_max=False),
    "senteval": RelatednessSchedule(epochs_per_eval=50, max_epochs=1000, patience=4,
                                    reset_on_improvement=False, last_block_may_pass_max=True),
}
DEFAULT_SCHEDULE = "senteval"


@dataclasses.dataclass(frozen=True)
class RelatednessModel:
    """A head and its training loss (module docstring). build(K, hidden width) -> a module
    mapping u, v [B, D] to log p [B, K]; loss(target [B, K], log p [B, K], weight [B]) -> the
    minibatch's loss (weight 0: a filler row)."""

    build: Callable[[int, int], nn.Module]
    loss: Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


def _mean_kl(target: jax.Array, log_probs: jax.Array, weight: jax.Array) -> jax.Array:
    return weight @ kl_divergences(target, log_probs) / jnp.maximum(jnp.sum(weight), 1.0)


def _summed_squared_error(target: jax.Array, log_probs: jax.Array, weight: jax.Array
                          ) -> jax.Array:
    return weight @ squared_errors(target, log_probs)


HEADS = {
    "tai": RelatednessModel(
        lambda num_classes, hidden_dim: RelatednessHead(num_classes=num_classes,
                                                        hidden_dim=hidden_dim), _mean_kl),
    "senteval": RelatednessModel(
        lambda num_classes, hidden_dim: LinearRelatednessHead(num_classes=num_classes),
        _summed_squared_error),
}
DEFAULT_HEAD = "tai"


@dataclasses.dataclass(frozen=True)
class RelatednessScore:
    """Test Pearson / Spearman / MSE of the epoch with the best dev Pearson."""

    pearson: float
    spearman: float
    mse: float
    dev_pearson: float
    best_epoch: int


def _epoch_runner(head: nn.Module, head_loss: Callable, optimizer: optax.GradientTransformation):
    """A jitted function running one epoch of minibatch steps given its batch plan."""

    def loss(params, u, v, target, weight):
        return head_loss(target, head.apply({"params": params}, u, v), weight)

    @jax.jit
    def run_epoch(params, opt_state, u, v, targets, batch_rows, batch_weights):
        """batch_rows int32[S, B] row indices, batch_weights float32[S, B] (0: filler)."""

        def step(carry, batch):
            params, opt_state = carry
            rows, weight = batch
            grads = jax.grad(loss)(params, u[rows], v[rows], targets[rows], weight)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), None

        (params, opt_state), _ = jax.lax.scan(step, (params, opt_state),
                                              (batch_rows, batch_weights))
        return params, opt_state

    return run_epoch


def _batch_plan(num_rows: int, batch_size: int, rng: np.random.Generator
                ) -> tuple[np.ndarray, np.ndarray]:
    """A shuffled epoch as (rows int32[S, B], weights float32[S, B]); the last batch is filled
    with weight-0 copies of row 0."""
    num_batches = -(-num_rows // batch_size)
    rows = np.zeros(num_batches * batch_size, np.int32)
    rows[:num_rows] = rng.permutation(num_rows)
    weights = (np.arange(len(rows)) < num_rows).astype(np.float32)
    return rows.reshape(num_batches, batch_size), weights.reshape(num_batches, batch_size)


def fit_relatedness(train: PairSplit, dev: PairSplit, test: PairSplit, *,
                    score_range: tuple[float, float], seed: int = SEED, hidden_dim: int = 50,
                    batch_size: int = 64, learning_rate: float = 1e-3,
                    schedule: RelatednessSchedule | str = DEFAULT_SCHEDULE,
                    head: str = DEFAULT_HEAD) -> RelatednessScore:
    """Trains the head named `head` (of HEADS; `hidden_dim`: the Tai head's hidden width) on
    train, reads dev Pearson when `schedule` (a RelatednessSchedule or a name of SCHEDULES)
    says, keeps the best parameters and scores test once with them."""
    if isinstance(schedule, str):
        schedule = SCHEDULES[schedule]
    low, _ = score_range
    model = HEADS[head]
    head_module = model.build(num_score_classes(score_range), hidden_dim)
    optimizer = optax.adam(learning_rate)
    u, v, scores = (jnp.asarray(a, jnp.float32) for a in train)
    params = head_module.init(jax.random.key(seed), u[:1], v[:1])["params"]
    opt_state = optimizer.init(params)
    targets = score_distribution(scores, score_range)
    run_epoch = _epoch_runner(head_module, model.loss, optimizer)
    predict = jax.jit(lambda params, u, v: expected_score(
        head_module.apply({"params": params}, u, v)) + low - 1.0)
    rng = np.random.default_rng(seed)
    best_pearson, best_params, best_epoch = -np.inf, params, 0
    epoch, misses = 0, 0
    while (epoch <= schedule.max_epochs if schedule.last_block_may_pass_max
           else epoch + schedule.epochs_per_eval <= schedule.max_epochs):
        for _ in range(schedule.epochs_per_eval):
            params, opt_state = run_epoch(params, opt_state, u, v, targets,
                                          *_batch_plan(len(scores), batch_size, rng))
        epoch += schedule.epochs_per_eval
        dev_pearson = pearson(np.asarray(predict(params, dev[0], dev[1])), dev[2])
        if dev_pearson > best_pearson:
            best_pearson, best_params, best_epoch = dev_pearson, params, epoch
            misses = 0 if schedule.reset_on_improvement else misses
        else:
            misses += 1
            if misses >= schedule.patience:
                break
    predictions = np.asarray(predict(best_params, test[0], test[1]))
    return RelatednessScore(pearson(predictions, test[2]), spearman(predictions, test[2]),
                            mean_squared_error(predictions, test[2]), float(best_pearson),
                            best_epoch)
