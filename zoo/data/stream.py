"""A continuation written as it is decoded: the text of the new tokens so far is decoded again
with each token (with the prompt, as `continue_text` does), and only the part that can no
longer change is written. An unfinished character (a byte-level piece waiting for the rest of
its bytes) and trailing whitespace (a tokenizer may join it to the next piece) wait for the next
token; `end` writes what is left, so the streamed bytes equal the line printed without
streaming.

    stream = TextStream.continuing(tokenizer, "And God said", sys.stdout.write, eos_id=2, pad_id=0)
    generate(model, ids, ..., on_step=lambda tokens: stream.put(int(tokens[0])))
    line = stream.end()
"""

from __future__ import annotations

from collections.abc import Callable

from zoo.data.prompts import continue_text


class TextStream:
    """`put` each token of one output as it is chosen, then `end`. `decode(ids)` is the text of
    the new ids, written after `prefix`."""

    def __init__(
        self,
        decode: Callable[[list[int]], str],
        write: Callable[[str], None],
        *,
        prefix: str = "",
        eos_id: int | None,
        pad_id: int,
    ) -> None:
        self.decode, self.prefix, self.write = decode, prefix, write
        self.eos_id, self.pad_id = eos_id, pad_id
        self.ids: list[int] = []
        self.shown = ""  # what was written after the prefix
        self.ended = False
        write(prefix)

    @classmethod
    def continuing(
        cls, tokenizer, prompt: str, write: Callable[[str], None], *, eos_id: int | None, pad_id: int
    ) -> TextStream:
        """A decoder-only model's line: the prompt, then its continuation."""
        return cls(
            lambda ids: continue_text(tokenizer, prompt, ids)[len(prompt) :],
            write,
            prefix=prompt,
            eos_id=eos_id,
            pad_id=pad_id,
        )

    def text(self) -> str:
        """The text of the tokens put so far (after the prefix)."""
        return self.decode(self.ids)

    def put(self, token: int) -> None:
        if self.ended:
            return
        if token == self.eos_id:  # the row ended: nothing after it is shown (as strip_special)
            self.ended = True
            return
        if token == self.pad_id:  # dropped, as strip_special drops it
            return
        self.ids.append(int(token))
        settled = self.text().rstrip("\ufffd").rstrip()
        if len(settled) > len(self.shown) and settled.startswith(self.shown):
            self.write(settled[len(self.shown) :])
            self.shown = settled

    def end(self) -> str:
        """Writes the rest of the line and its newline; returns the whole line (prefix included)."""
        rest = self.text()
        if rest.startswith(self.shown):
            self.write(rest[len(self.shown) :] + "\n")
        else:  # the tokenizer rewrote text already shown: the whole line again, on its own line
            self.write("\n" + self.prefix + rest + "\n")
        self.ended = True
        return self.prefix + rest
