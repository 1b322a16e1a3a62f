"""The generator role: the trained model answers the prompt itself; its text is the outcome."""

from __future__ import annotations

from typing import Any

from src.model.network import PolicyNetwork
from src.policy.role import Outcomes
from src.utils.errors import ConfigError


class TemplateFieldError(ConfigError, KeyError):
    """`policy.template` or `policy.sft_target` names a field the data rows lack: a setting that
    does not fit the data. A `KeyError` too, as `str.format` raises; printed without the quotes
    a `KeyError` adds."""

    __str__ = Exception.__str__


class Generator:
    """Builds prompts from rows with a template, optionally through the tokenizer's chat template.

    `template` is a `str.format` pattern over the row's fields; `sft_target` is the pattern of
    the completion a supervised warm start teaches (EOS is appended by the SFT module).
    `use_chat_template="auto"` uses the tokenizer's chat template when it has one and otherwise
    puts the system prompt above the text, so one recipe serves instruct and plain models.
    `examples` are worked (user, assistant) turns shown before the question (few-shot), and
    `response_prefix` is text the answer is made to start with (e.g. "<think>\\n"): it ends the
    prompt and is put back in front of each completion before the reward sees it.
    """

    def __init__(
        self,
        template: str = "{question}",
        sft_target: str = " {answer}",
        system_prompt: str | None = None,
        use_chat_template: bool | str = False,
        examples: list[dict[str, str]] | None = None,
        response_prefix: str = "",
    ) -> None:
        for number, example in enumerate(examples or []):
            if set(example) != {"user", "assistant"}:
                raise ConfigError(
                    f"policy.examples[{number}] must have exactly the keys user and assistant, "
                    f"got {sorted(example)}"
                )
        self.template = template
        self.sft_target = sft_target
        self.system_prompt = system_prompt
        self.use_chat_template = use_chat_template
        self.examples = [dict(example) for example in examples or []]
        self.response_prefix = response_prefix or ""

    def _fill(self, pattern: str, row: dict[str, Any], what: str) -> str:
        try:
            return pattern.format(**row)
        except KeyError as error:
            raise TemplateFieldError(
                f"policy.{what} uses field {error.args[0]!r} which the data rows lack; "
                f"row fields are {sorted(row)}"
            ) from None

    def prompts(self, rows: list[dict[str, Any]], tokenizer: Any = None) -> list[str]:
        """One prompt text per row, ending with `response_prefix`."""
        texts = [self._fill(self.template, row, "template") for row in rows]
        if self._uses_chat(tokenizer):
            prompts = [self._chat(tokenizer, text) for text in texts]
        else:
            prompts = [self._plain(text) for text in texts]
        return [prompt + self.response_prefix for prompt in prompts]

    def _uses_chat(self, tokenizer: Any) -> bool:
        """Whether prompts go through the tokenizer's chat template (`use_chat_template` true,
        or auto and the tokenizer has one); true without a template is an error."""
        has_template = getattr(tokenizer, "chat_template", None) is not None
        if self.use_chat_template is True and not has_template:
            raise ConfigError(
                "policy.use_chat_template is true but the tokenizer has no chat template"
            )
        return bool(self.use_chat_template) and has_template

    def _chat(self, tokenizer: Any, text: str) -> str:
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        for example in self.examples:
            messages.append({"role": "user", "content": example["user"]})
            messages.append({"role": "assistant", "content": example["assistant"]})
        messages.append({"role": "user", "content": text})
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def _plain(self, text: str) -> str:
        if not self.use_chat_template:  # plain prompts are the template alone, as configured
            return text
        parts = [self.system_prompt] if self.system_prompt else []
        parts += [f"{example['user']}\n{example['assistant']}" for example in self.examples]
        return "\n\n".join([*parts, text]) + "\n"

    def reads_completions(self) -> bool:
        """The completions are what is scored."""
        return True

    def sft_targets(self, rows: list[dict[str, Any]]) -> list[str]:
        """The completion a warm start teaches: the filled target less the response prefix."""
        targets = [self._fill(self.sft_target, row, "sft_target") for row in rows]
        return [target.removeprefix(self.response_prefix) for target in targets]

    def prepare(self, network: PolicyNetwork, rows: list[dict[str, Any]]) -> dict[str, float]:
        """Nothing to prepare: the prompt is the template alone."""
        return {}

    def outcomes(
        self,
        completions: list[str],
        rows: list[dict[str, Any]],
        network: PolicyNetwork | None = None,
    ) -> Outcomes:
        """What the reward scores: the answer as a whole, response prefix included."""
        return Outcomes([self.response_prefix + completion for completion in completions])
