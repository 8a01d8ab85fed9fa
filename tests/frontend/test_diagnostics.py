"""How a located diagnostic shows its source line.

* The echoed line is the lexer's line: only '\\n' ends a line, so '\\f', '\\v', '\\r', U+2028, U+2029 and
  U+0085 never shift the line numbers; the '\\r' of '\\r\\n' is not shown.
* Control and invisible characters (escape sequences, C1 controls, bidi overrides, zero-width spaces) are
  shown escaped, so a diagnostic cannot act on the terminal; the caret stays under the right character.
* The caret line repeats the tabs of the source line; wide characters take two columns.
* A long line is cut to a window around the caret.
"""

import pytest

from tdsl.frontend.check import load_source
from tdsl.frontend.diagnostics import SourceError, source_lines

KERNEL = "kernel f(A: f32[N]) -> Y: f32[N] {\n"


def _error(text: str, filename: str = "p.tdsl") -> str:
    with pytest.raises(SourceError) as info:
        load_source(text, filename)
    return str(info.value)


@pytest.mark.parametrize(
    "separator", ["\f", "\r", "\u2028", "\u2029", "\x85", "\x1c", "\x1d", "\x1e"], ids=ascii
)
def test_characters_that_splitlines_breaks_at_do_not_shift_the_echoed_line(separator):
    text = f"const N = 8 # one{separator}two\n" + KERNEL + "  Y[i] = B[i]\n}\n"
    assert _error(text) == "p.tdsl:3:10: error: unknown tensor 'B'\n    Y[i] = B[i]\n           ^"


def test_source_lines_are_the_lexers_lines():
    assert source_lines("a\fb\nc\u2028d\r\ne\rf\n") == ["a\fb", "c\u2028d", "e\rf", ""]


def test_crlf_line_endings_are_not_echoed():
    text = "const N = 8\r\n" + KERNEL.replace("\n", "\r\n") + "  Y[i] = B[i]\r\n}\r\n"
    assert _error(text) == "p.tdsl:3:10: error: unknown tensor 'B'\n    Y[i] = B[i]\n           ^"


def test_vertical_tab_is_an_unexpected_character_on_its_own_line():
    text = "const N = 8\n" + KERNEL + "  Y[i] = A[i] \v+ 1\n}\n"
    assert _error(text) == (
        "p.tdsl:3:15: error: unexpected character '\\x0b'\n"
        "    Y[i] = A[i] \\x0b+ 1\n"
        "                ^^^^"
    )


def test_caret_line_repeats_the_tabs_of_the_source_line():
    text = "const N = 8\n" + KERNEL + "\tY[i] =\tA[i]\t+ B[i]\n}\n"
    assert _error(text) == (
        "p.tdsl:3:16: error: unknown tensor 'B'\n"
        "  \tY[i] =\tA[i]\t+ B[i]\n"
        "  \t      \t    \t  ^"
    )


@pytest.mark.parametrize(
    "char, shown",
    [
        ("\x1b", "\\x1b"),  # ANSI escape
        ("\x07", "\\x07"),  # bell
        ("\x9b", "\\x9b"),  # C1 control sequence introducer
        ("\u202e", "\\u202e"),  # right-to-left override
        ("\u2067", "\\u2067"),  # right-to-left isolate
        ("\u200b", "\\u200b"),  # zero-width space
        ("\ufeff", "\\ufeff"),  # zero-width no-break space
        ("\x00", "\\x00"),
    ],
    ids=ascii,
)
def test_control_characters_in_the_echoed_line_are_escaped(char, shown):
    text = "const N = 8\n" + KERNEL + f"  Y[i] = {char}A[i] + B[i]\n}}\n"
    assert _error(text) == (
        f"p.tdsl:3:10: error: unexpected character '{shown}'\n"
        f"    Y[i] = {shown}A[i] + B[i]\n"
        "           " + "^" * len(shown)
    )


def test_escaped_whitespace_before_the_faulty_text_moves_the_caret_with_it():
    # Form feed and a lone carriage return are whitespace to the lexer: escaped in the echo (4 and 2 columns).
    text = "const N = 8\n" + KERNEL + "  Y[i] =\f\rB[i]\n}\n"
    assert _error(text) == (
        "p.tdsl:3:11: error: unknown tensor 'B'\n"
        "    Y[i] =\\x0c\\rB[i]\n"
        "                ^"
    )


def test_escapes_in_a_comment_are_shown_escaped():
    text = "const N = 8 # \x1b[2J\u202e\tx\n" + KERNEL + "  Y[i] = A[i]\n}\nconst N = 4 # \x1b]0;owned\x07\n"
    assert _error(text) == (
        "p.tdsl:5:7: error: duplicate definition of size 'N' (first defined at line 1)\n"
        "  const N = 4 # \\x1b]0;owned\\x07\n"
        "        ^^^^^"
    )


def test_wide_characters_take_two_columns():
    text = "const N = 8\n" + KERNEL + "  Y[i] = A[i] + \u6f22 + 1\n}\n"
    assert _error(text) == (
        "p.tdsl:3:17: error: unexpected character '\u6f22'\n"
        "    Y[i] = A[i] + \u6f22 + 1\n"
        "                  ^^"
    )
    text = "const N = 8\n" + KERNEL + "  Y[i] = A[i] # \u6f22\u5b57\n  Y[i] = \u6f22\n}\n"
    assert _error(text).split("\n")[0] == "p.tdsl:4:10: error: unexpected character '\u6f22'"


def test_a_long_line_is_cut_to_a_window_around_the_caret():
    terms = " + ".join(f"A[{k}]" for k in range(40))
    text = "const N = 80\n" + KERNEL + f"  Y[i] = {terms} + B[i] + {terms}\n}}\n"
    head, echo, caret = _error(text).split("\n")
    column = text.split("\n")[2].index("B[i]") + 1
    assert head == f"p.tdsl:3:{column}: error: unknown tensor 'B'"
    assert echo.startswith("  ...") and echo.endswith("...")
    assert len(echo) <= 2 + 3 + 160 + 3
    assert echo[caret.index("^") : caret.index("^") + 4] == "B[i]"
    assert caret.strip() == "^"


def test_control_characters_in_the_file_name_are_escaped():
    assert _error("const N = 0\n", filename="bad\x1b[31m.tdsl").startswith("bad\\x1b[31m.tdsl:1:7: error: ")


def test_a_construct_over_several_lines_is_marked_at_its_first_word():
    """A step written over two lines used to get one caret under its first character."""
    from tdsl.frontend.ast import Span

    source = "schedule s {\n  compute_at(B,\n             Y.i)\n}\n"
    err = SourceError("compute_at: loop i belongs to B itself", Span(2, 3, 3, 17), source, "p.tdsl")
    assert str(err) == "p.tdsl:2:3: error: compute_at: loop i belongs to B itself\n    compute_at(B,\n    ^^^^^^^^^^"


def test_a_step_over_several_lines_is_located_through_the_cli(tmp_path, capsys):
    from tdsl.compiler.driver.cli import main

    path = tmp_path / "p.tdsl"
    path.write_text("const N = 8\n" + KERNEL + "  Y[i] = A[i]\n}\nschedule s {\n  compute_at(Y,\n     Y.i)\n}\n")
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert ":6:3: error: compute_at" in err and "\n    compute_at(Y,\n    ^^^^^^^^^^\n" in err
