"""The command line's ``--episode`` option: episode numbers as a list and ranges (``--episode 2 48``,
``--episode 3-7``, ``--episode 1,4-6``), the flag repeated as well (``-e 2 -e 48``)."""
from __future__ import annotations

import re

import click

# one or more numbers or ranges a-b, separated by commas or spaces
SPEC = re.compile(r"\s*\d+(\s*-\s*\d+)?(\s*[,\s]\s*\d+(\s*-\s*\d+)?)*\s*,?\s*")
MAX_RANGE = 1 << 24  # episodes one range may name (a run of 10,000 rollouts has far fewer)


def parse_episodes(spec: str) -> list[int]:
    """The episode numbers ``spec`` names, in its order ("2 48" -> [2, 48], "3-7" -> [3, 4, 5,
    6, 7]); ValueError saying what is wrong otherwise."""
    if not SPEC.fullmatch(spec):
        raise ValueError(f"'{spec}' is not a list of episode numbers; give numbers and ranges, e.g. "
                         f"--episode 2 48, --episode 3-7 or --episode 1,4-6")
    numbers: list[int] = []
    for token in re.sub(r"\s*-\s*", "-", spec).replace(",", " ").split():
        first, _, last = token.partition("-")
        low, high = int(first), int(last or first)
        if high < low:
            raise ValueError(f"the range {token} runs backwards; give it as {high}-{low}")
        if high - low >= MAX_RANGE:
            raise ValueError(f"the range {token} names over {MAX_RANGE} episodes; give a smaller one")
        numbers.extend(range(low, high + 1))
    return numbers


class EpisodeOption(click.Option):
    """``--episode``: each occurrence takes its value and the values after it that are episode
    numbers or ranges (so ``--episode 2 48`` is one list); the values are parsed by
    ``parse_episodes`` into a tuple of numbers, sorted and without repeats (``one``: a single
    number, ``absent`` when the option is not given, refused with a message when more are given)."""

    def __init__(self, *args, one: bool = False, absent: int | None = None, **kwargs):
        kwargs.setdefault("metavar", "N" if one else "N|A-B ...")
        kwargs.update(multiple=True, type=str)
        super().__init__(*args, **kwargs)
        self.one, self.absent = one, absent

    def add_to_parser(self, parser, ctx) -> None:
        super().add_to_parser(parser, ctx)
        for name in self.opts:
            option = getattr(parser, "_long_opt", {}).get(name) or getattr(parser, "_short_opt", {}).get(name)
            if option is None:  # a click whose parser is laid out otherwise: "2,48" still works
                continue
            take = option.process

            def process(value, state, take=take) -> None:
                more = []
                while state.rargs and SPEC.fullmatch(state.rargs[0]):
                    more.append(state.rargs.pop(0))
                take(" ".join([value, *more]), state)

            option.process = process

    def process_value(self, ctx, value):
        specs = super().process_value(ctx, value) or ()
        try:
            numbers = sorted({n for spec in specs for n in parse_episodes(spec)})
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=self) from None
        if not self.one:
            return tuple(numbers)
        if len(numbers) > 1:
            raise click.BadParameter(f"this command takes one episode, not {len(numbers)}; give one number",
                                     ctx=ctx, param=self)
        return numbers[0] if numbers else self.absent
