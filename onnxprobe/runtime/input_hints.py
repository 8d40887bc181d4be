"""What a failed run is told of the inputs onnxprobe made, in its reader's words (``errors.Voice``): dimensions it
guessed (``shape_hint``), integer and bool inputs it drew at random (``random_hint``); ``runtime.feeds.Feeds.hint``
joins them after the run's error."""

from __future__ import annotations

from onnxprobe.text import clean, some

# the settings that give inputs, as the API and the command line name them (``errors.setting_error``): the
# strings ``input_spec`` reads (its parameters), and the InputSpec those make (its fields)
SHAPES, FILES, ARRAYS = ("shapes", "--shape"), ("files", "--input"), ("arrays", "--inputs")
SEED = ("seed", "--seed")
INT_RANGE = ("int_range", "--int-range")


def shape_hint(say, name: str = "NAME") -> str:
    """The advice when dynamic dimensions were guessed, in ``say``'s words (``errors.Voice``); ``name``: the
    input whose dimensions were guessed, where it is one."""
    return f"dynamic dimensions were set to 1: give real sizes with {say.given(SHAPES, clean(name), 'DIMS')}"


def random_hint(say, drawn: list[str], ints: list[str], int_range: tuple[int, int]) -> str:
    """The advice when integer or bool inputs (``drawn``; ``ints``: the integer ones) were seeded random data, which
    a model may not take (counts, indices, conditions): the range they were drawn from first, where integers were
    (one flag, no file: an index past a table of 50 drawn in [0, 100) was told only to give real values)."""
    lo, hi = int_range
    narrow = f"integers drawn in [{lo}, {hi}): set the range with {say(INT_RANGE)} LOW:HIGH, or " if ints else ""
    kind = ("integer" if ints else "bool") + (" or bool" if ints and len(ints) < len(drawn) else "")
    return (f"{kind} input{'s' if len(drawn) > 1 else ''} {some(drawn, form=clean)}: seeded random data, which a model "
            f"may not take: {narrow}give real values with {say.given(FILES, 'NAME', 'VALUE')} or "
            f"{say.either(ARRAYS[0] + ' (a dict of arrays)', say(ARRAYS) + ' FILE.npz')}")
