"""Conformance probes: a fast path is used only after it has given the plain modules' numbers.

Every fast path in this folder reaches past another package's public API (transformers'
layer internals, peft's adapter tensors, torch's private MKL ops, the cache's `update`), so
a new release can change what it stands in for without any error. Before a path is first
used on a kind of network in a process, `proven` runs its check: a small fixed input
(`probe_input`) through the fast path and through the network's own forward, compared as
`docs/reliability.md` states. A difference within `tolerance` proves the path for the rest
of the process; a larger one, or an exception inside the fast path, logs one WARNING naming
the path and the difference, and the caller runs the plain path from then on. Each verdict
and its cost are logged once and kept in `verdicts()`.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import Tensor, nn

from src.model.positions import position_ids
from src.utils.errors import ConfigError

log = logging.getLogger(__name__)
T = TypeVar("T")

# largest accepted difference, by the float type the network computes in: log-probs and
# log-softmaxed logits in nats (in a half type, logits are compared by the expected
# difference of a drawn token's log-prob, `log_softmax_difference`); gradients relative to
# the largest entry of the plain path's gradient. A path whose arithmetic is ordered
# otherwise than the modules' in a half type (the decoding steps) is held to a tolerance
# measured on the network instead (`src.model.fast.half_rounding`)
TOLERANCE = {torch.float64: 1e-6, torch.float32: 1e-3, torch.bfloat16: 5e-2, torch.float16: 5e-2}


@dataclass(frozen=True)
class Verdict:
    """What a probe found for one fast path on one kind of network."""

    path: str  # the fast path's name, as in docs/reliability.md
    network: str  # the kind of network it was checked on (`network_kind`)
    proven: bool  # within tolerance: the fast path runs
    difference: float  # the largest difference found (inf when the fast path raised)
    tolerance: float
    seconds: float  # the probe's cost
    error: str = ""  # the exception the fast path raised, if any


_verdicts: dict[tuple[str, str], Verdict] = {}
_measured: dict[tuple[str, str], float] = {}  # `measured_per_kind`

# a comma-separated list of fast paths to leave out without probing, or `all`
OFF_VARIABLE = "GRPO_FAST_PATHS_OFF"
# every fast path's name; a path proven as several, `fused_steps+packed_weights`, is off where
# $GRPO_FAST_PATHS_OFF names any of them
FAST_PATHS = (
    "cache_room",
    "captured_steps",
    "chunked_head",
    "continued_prefill",
    "fused_steps",
    "grouped_attention",
    "lean_layers",
    "onednn_products",
    "packed_weights",
    "shared_prompt",
    "static_steps",
    "weight_grads",
)


def proven(
    path: str,
    network: nn.Module,
    check: Callable[[], float],
    tolerance: Callable[[], float] | None = None,
) -> bool:
    """Whether fast path `path` may run on `network`: `check()` (the largest difference
    between the fast and the plain path on the probe input) is run the first time a kind of
    network asks, and its verdict kept for the process. `tolerance()`, where given, is the
    largest difference accepted (`tolerance_of` the network otherwise)."""
    key = (path, network_kind(network))
    if key not in _verdicts:
        if turned_off(path):
            log.info("fast path %s turned off by %s", path, OFF_VARIABLE)
            _verdicts[key] = Verdict(path, key[1], False, float("nan"), 0.0, 0.0, "turned off")
        else:
            _verdicts[key] = _run(path, key[1], network, check, tolerance)
    return _verdicts[key].proven


def built(path: str, network: nn.Module, build: Callable[[], T]) -> T | None:
    """`build()`, the making of fast path `path`'s object for `network`, under the probe's
    guard: building reads other packages' internals too (transformers' attributes, peft's
    adapter tensors, torch's private ops), so what it raises is kept as the path's failed
    verdict on this kind of network, with one WARNING, and None is returned, as for a path
    already refused here (not built again)."""
    key = (path, network_kind(network))
    verdict = _verdicts.get(key)
    if verdict is not None and not verdict.proven:
        return None
    try:
        return build()
    except Exception as exc:  # a release that moved what the path reads must not stop a run
        error = f"{type(exc).__name__}: {exc}"
        _verdicts[key] = Verdict(
            path, key[1], False, float("inf"), tolerance_of(network), 0.0, error
        )
        log.warning(
            "fast path %s could not be built for %s (%s): the plain path runs for the rest of "
            "this process",
            path,
            key[1],
            error,
        )
        return None


def proven_object(
    path: str,
    network: nn.Module,
    build: Callable[[], T | None],
    check: Callable[[T], float],
    tolerance: Callable[[], float] | None = None,
) -> T | None:
    """The fast object of path `path` for `network`, built and checked under the probe's
    guard: `build()` makes it (None where the path does not serve this network), and
    `check(object)` is its largest difference from the plain path, run the first time a kind
    of network asks. None where building raises, the check refuses it, or either has done
    so before on this kind of network: the caller then runs the plain path."""
    made = built(path, network, build)
    if made is None or not proven(path, network, lambda: check(made), tolerance):
        return None
    return made


def refused(path: str, network: nn.Module) -> bool:
    """Whether this process has a verdict against `path` on this kind of network."""
    verdict = standing(path, network)
    return verdict is not None and not verdict.proven


def standing(path: str, network: nn.Module) -> Verdict | None:
    """The verdict this process has reached for `path` on this kind of network, if any."""
    return _verdicts.get((path, network_kind(network)))


def imply(path: str, network: nn.Module, by: str) -> None:
    """Record `path` as proven on `network` without a probe of its own, because the proven
    path `by` runs the same code and more (`fused_steps` is `fused_steps+packed_weights` with
    torch's public product in place of the packed one). Nothing changes where `path` has a
    verdict already, is turned off, or `by` is not proven."""
    key, basis = (path, network_kind(network)), standing(by, network)
    if key in _verdicts or turned_off(path) or basis is None or not basis.proven:
        return
    _verdicts[key] = Verdict(path, key[1], True, basis.difference, basis.tolerance, 0.0)
    log.info("fast path %s proven on %s with %s", path, key[1], by)


def turned_off(path: str) -> bool:
    """Whether $GRPO_FAST_PATHS_OFF names the path, one of its parts (`fused_steps` for
    `fused_steps+packed_weights`), or `all`: for a run that must take the plain path, or to
    measure what a fast path earns."""
    names = turned_off_names()
    return "all" in names or any(part in names for part in path.split("+"))


def turned_off_names() -> set[str]:
    """The names $GRPO_FAST_PATHS_OFF gives, refused in one line where one of them names no
    fast path (a misspelt name would leave the path it meant on, without a word)."""
    names = {name.strip() for name in os.environ.get(OFF_VARIABLE, "").split(",")} - {""}
    unknown = sorted(names - set(FAST_PATHS) - {"all"})
    if unknown:
        raise ConfigError(
            f"${OFF_VARIABLE} names {unknown[0]!r}, which is no fast path: name any of "
            f"{', '.join(FAST_PATHS)}, or all"
        )
    return names


def _run(
    path: str,
    kind: str,
    network: nn.Module,
    check: Callable[[], float],
    tolerance_given: Callable[[], float] | None = None,
) -> Verdict:
    was_training = network.training
    network.eval()  # no dropout: both paths must see the same network
    start = time.perf_counter()
    error = ""
    tolerance = tolerance_of(network)
    try:
        if tolerance_given is not None:
            tolerance = float(tolerance_given())
        difference = float(check())
    except Exception as exc:  # a fast path that breaks on a new release must not stop a run
        difference, error = float("inf"), f"{type(exc).__name__}: {exc}"
    finally:
        network.train(was_training)
    seconds = time.perf_counter() - start
    ok = difference <= tolerance  # NaN is not within any tolerance
    verdict = Verdict(path, kind, ok, difference, tolerance, seconds, error)
    if ok:
        log.info(
            "fast path %s proven on %s in %.0f ms (largest difference %.1e, tolerance %.1e)",
            path,
            kind,
            1000 * seconds,
            difference,
            tolerance,
        )
    else:
        found = error or f"largest difference {difference:.3g} > tolerance {tolerance:.2g}"
        log.warning(
            "fast path %s disagrees with the plain modules of %s (%s): the plain path runs "
            "for the rest of this process",
            path,
            kind,
            found,
        )
    return verdict


def verdicts() -> list[Verdict]:
    """Every verdict of this process, in the order the probes ran."""
    return list(_verdicts.values())


def forget_verdicts() -> None:
    """Drop every verdict and measurement, so the next use of each path probes again
    (tests)."""
    _verdicts.clear()
    _measured.clear()


def measured_per_kind(name: str, network: nn.Module, measure: Callable[[], float]) -> float:
    """`measure()` for this kind of network, taken the first time it is asked for in this
    process (a tolerance measured on the network, `decoding_tolerance`)."""
    key = (name, network_kind(network))
    if key not in _measured:
        _measured[key] = float(measure())
    return _measured[key]


def network_kind(network: nn.Module) -> str:
    """What a verdict holds for: the architecture, its size, float type and device, and
    whether LoRA adapters sit on it (a deep copy or the same network later shares it)."""
    base = network.get_base_model() if hasattr(network, "get_base_model") else network
    config = getattr(base, "config", None)
    shape = "x".join(str(getattr(config, key, "?")) for key in ("hidden_size", "num_hidden_layers"))
    parameter = next(network.parameters(), None)
    dtype = "?"
    if parameter is not None:  # float32 weights under autocast compute otherwise than half ones
        stored, computed = parameter.dtype, computed_dtype(network)
        dtype = str(computed) if stored == computed else f"{stored} computing {computed}"
        dtype = dtype.replace("torch.", "")
    device = parameter.device.type if parameter is not None else "?"
    lora = "+lora" if hasattr(network, "disable_adapter") else ""
    return f"{type(base).__name__}({shape}, {dtype}, {device}){lora}"


def computed_dtype(network: nn.Module) -> torch.dtype:
    """The float type the network computes in now: autocast's where it is on for the
    network's device (`src.model.precision.computing`), else that of its first float
    parameter (float32 for a network without any)."""
    device = device_of(network).type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    parameter = next((p for p in network.parameters() if p.is_floating_point()), None)
    return parameter.dtype if parameter is not None else torch.float32


def tolerance_of(network: nn.Module) -> float:
    """`TOLERANCE` for the float type the network computes in."""
    return TOLERANCE.get(computed_dtype(network), TOLERANCE[torch.float32])


def device_of(network: nn.Module) -> torch.device:
    """The device of the network's first parameter (the CPU for a network without any)."""
    parameter = next(network.parameters(), None)
    return parameter.device if parameter is not None else torch.device("cpu")


def probe_input(
    network: nn.Module, prompts: int = 2, group_size: int = 2, prompt_length: int = 6
) -> tuple[Tensor, Tensor, Tensor]:
    """A fixed probe batch on the network's device: `prompts` left-padded prompts [B, P] (the
    second two tokens shorter), their mask, and `group_size` continuations of 3 tokens per
    prompt [B * G, 3], rows i*G .. i*G+G-1 continuing prompt i. Token ids come from a seeded
    generator of their own: the process's random state is not touched."""
    vocab = network.get_input_embeddings().num_embeddings
    generator = torch.Generator().manual_seed(1234)
    ids = torch.randint(0, vocab, (prompts, prompt_length), generator=generator)
    mask = torch.ones_like(ids)
    if prompts > 1:
        mask[1, :2] = 0
    continuations = torch.randint(0, vocab, (prompts * group_size, 3), generator=generator)
    device = device_of(network)
    return ids.to(device), mask.to(device), continuations.to(device)


def probe_forward(network: nn.Module) -> tuple[dict[str, Tensor], Tensor, int]:
    """The probe batch's full sequences (left-padded prompts, each followed by its
    continuations) as a forward's arguments, which of their positions are real, and how many
    positions at their end are continuations (real in every row)."""
    prompt_ids, prompt_mask, fed = probe_input(network)
    group = fed.size(0) // prompt_ids.size(0)
    ids = torch.cat([prompt_ids.repeat_interleave(group, dim=0), fed], dim=1)
    mask = torch.cat([prompt_mask.repeat_interleave(group, dim=0), torch.ones_like(fed)], dim=1)
    arguments = {"input_ids": ids, "attention_mask": mask, "position_ids": position_ids(mask)}
    return arguments, mask.bool(), fed.size(1)


def log_softmax_difference(fast: Tensor, plain: Tensor) -> float:
    """How far two logit tensors lie apart after log-softmax over the last dimension: what
    sampling and log-probs read of them. In float32 and float64, the largest difference of
    any entry. Under autocast to a half type (`src.model.precision.computing`) the rounding
    of logits of tokens nobody draws moves their log-probs by a nat or more, so there it is
    the largest, over positions, of the expected difference of the log-prob of a token drawn
    from the plain path's distribution, sum_v p(v) |log q(v) - log p(v)| (infinite where
    either holds a non-finite value that the other does not)."""
    fast_logps = torch.log_softmax(fast.detach().double(), dim=-1)
    plain_logps = torch.log_softmax(plain.detach().double(), dim=-1)
    largest = largest_difference(fast_logps, plain_logps)
    if not torch.is_autocast_enabled(fast.device.type) or not math.isfinite(largest):
        return largest
    expected = (plain_logps.exp() * (fast_logps - plain_logps).abs()).nan_to_num_(0.0)
    return float(expected.sum(dim=-1).max()) if expected.numel() else 0.0


def largest_difference(fast: Tensor, plain: Tensor) -> float:
    """max |fast - plain|; inf when the shapes differ, either holds a NaN, their infinities
    are not the same entries with the same sign, or no value is finite: a path is never
    proven on output that says nothing (a network that gives NaN in its precision)."""
    if fast.shape != plain.shape:
        return float("inf")
    wide = torch.promote_types(torch.promote_types(fast.dtype, plain.dtype), torch.float32)
    fast, plain = fast.detach().to(wide), plain.detach().to(wide)
    if fast.numel() == 0:
        return 0.0
    largest = float((fast - plain).abs().max())
    if math.isfinite(largest):  # then both are finite everywhere: the common, quick case
        return largest
    if bool(fast.isnan().any()) or bool(plain.isnan().any()):
        return float("inf")
    finite = plain.isfinite()  # what is left: infinities, as -inf log-probs of masked logits
    if not torch.equal(fast.isfinite(), finite) or not torch.equal(fast[~finite], plain[~finite]):
        return float("inf")
    if not bool(finite.any()):
        return float("inf")
    return float((fast[finite] - plain[finite]).abs().max())
