"""Fast path `cache_room`: the transformers key/value cache given room for the whole decoding.

A growing cache layer (`DynamicLayer`) concatenates each step's keys and values onto what it
holds, copying the whole cache into a new tensor per token. `reserve` allocates every plain
growing layer once for all the new tokens and replaces the layer's `update` with writes in
place. That reaches into the layer's attributes, so it runs only once the `cache_room` probe
(`src.model.fast.decoding.teacher_forced_difference`) has found a few decoding steps with it
equal to the network's own forward.
"""

from __future__ import annotations

from torch import Tensor


def reserve(cache: object, new_tokens: int) -> None:
    """Give every plain growing layer of a transformers key/value cache room for `new_tokens`
    more positions, so a decoding step writes its keys and values in place instead of
    copying the whole cache into a new tensor (what `DynamicLayer.update` does). Layers of
    other kinds (sliding windows, linear attention) and caches without layers stay as they
    are."""
    try:
        from transformers.cache_utils import DynamicLayer
    except ImportError:  # a transformers without per-layer caches
        return
    for layer in getattr(cache, "layers", []):
        if type(layer) is DynamicLayer and layer.is_initialized and layer.keys.dim() == 4:
            _reserve_layer(layer, new_tokens)


def _reserve_layer(layer: object, new_tokens: int) -> None:
    keys, values = layer.keys, layer.values
    filled = keys.size(-2)
    key_room = keys.new_empty(*keys.shape[:-2], filled + new_tokens, keys.size(-1))
    value_room = values.new_empty(*values.shape[:-2], filled + new_tokens, values.size(-1))
    key_room[..., :filled, :] = keys
    value_room[..., :filled, :] = values

    def update(key_states: Tensor, value_states: Tensor, *args: object, **kwargs: object):
        nonlocal filled
        end = filled + key_states.size(-2)
        key_room[..., filled:end, :] = key_states
        value_room[..., filled:end, :] = value_states
        filled = end
        layer.keys, layer.values = key_room[..., :end, :], value_room[..., :end, :]
        return layer.keys, layer.values

    layer.keys, layer.values = key_room[..., :filled, :], value_room[..., :filled, :]
    layer.update = update
