"""PNML and srepr input from untrusted files (issue 13): no DTD, no code, no unbounded work, no recursion."""

import time

import pytest
import sympy

from queuesgd.errors import InvalidParameterError
from queuesgd.petri import PetriNet
from queuesgd.petri.interchange import SREPR_CLASSES, SREPR_CONSTANTS
from queuesgd.petri.pnml import from_pnml, parse_srepr
from queuesgd.petri.pnml_read import MAX_INSCRIPTION_DEPTH

NET_BODY = (
    '<place id="a"><initialMarking><text>1</text></initialMarking></place>'
    '<transition id="t"><toolspecific tool="queuesgd" version="1"><kind>timed</kind>'
    "<rate{fmt}>{rate}</rate></toolspecific></transition>"
    '<arc id="e1" source="a" target="t"/><arc id="e2" source="t" target="a"/>'
)


def pnml(body: str, prolog: str = "") -> str:
    return f'{prolog}<pnml><net id="n"><page id="g">{body}</page></net></pnml>'


def loop(rate: str = "2.0", fmt: str = "") -> str:
    return NET_BODY.format(rate=rate, fmt=fmt)


# ---- XML: no DTD, no entities ------------------------------------------------------------------------
LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE pnml [<!ENTITY a "aaaaaaaaaa">'
    + "".join(f'<!ENTITY {c} "{("&" + p + ";") * 10}">' for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    + "]>"
)


@pytest.mark.parametrize(
    ("prolog", "what"),
    [
        (LAUGHS, "document type declaration <!DOCTYPE pnml"),
        ('<!DOCTYPE pnml [<!ENTITY x SYSTEM "file:///etc/passwd">]>', "document type declaration"),
        ("<!DOCTYPE pnml>", "document type declaration <!DOCTYPE pnml"),
    ],
)
def test_dtds_and_entities_are_refused_before_expansion(prolog, what):
    marking = "&i;" if prolog is LAUGHS else "1"  # &i; would expand to 10**9 characters
    text = prolog + pnml(loop().replace("<text>1</text>", f"<text>{marking}</text>"))
    start = time.perf_counter()
    with pytest.raises(InvalidParameterError, match="without DTD or entity declarations") as err:
        from_pnml(text)
    assert time.perf_counter() - start < 2.0
    assert what in str(err.value)
    assert "root:" not in str(err.value)  # nothing of /etc/passwd is read or quoted


def test_a_dtd_is_refused_from_a_file_and_as_bytes(tmp_path):
    path = tmp_path / "net.pnml"
    path.write_text("<!DOCTYPE pnml>" + pnml(loop()))
    with pytest.raises(InvalidParameterError, match=f"^{path}: .*without DTD"):
        from_pnml(path)
    with pytest.raises(InvalidParameterError, match="^PNML text: .*without DTD"):
        from_pnml(("<!DOCTYPE pnml>" + pnml(loop())).encode("utf-16"))


# ---- depth: nested pages are read, nested inscriptions are bounded -----------------------------------
def test_fifty_thousand_nested_pages_are_read():
    depth = 50_000
    text = '<pnml><net id="n">' + '<page id="p{}">' * 1 + "".join(f'<page id="q{i}">' for i in range(depth))
    text = text.replace("{}", "0") + loop() + "</page>" * (depth + 1) + "</net></pnml>"
    net = from_pnml(text)
    assert net.place_names == ("a",) and net.transition_names == ("t",)
    assert net.pre.tolist() == [[1]] and net.post.tolist() == [[1]] and net.rates.tolist() == [2.0]


def test_deeply_nested_snakes_inscriptions_are_refused():
    token = "<value><token/></value>"
    deep = "<multiarc>" * (MAX_INSCRIPTION_DEPTH + 5) + token + "</multiarc>" * (MAX_INSCRIPTION_DEPTH + 5)
    body = loop().replace('<arc id="e1" source="a" target="t"/>', f'<arc id="e1" source="a" target="t">'
                          f"<inscription>{deep}</inscription></arc>")  # fmt: skip
    with pytest.raises(InvalidParameterError, match=f"nested at most {MAX_INSCRIPTION_DEPTH} deep"):
        from_pnml(pnml(body))
    ok = "<multiarc>" * 3 + token + token + "</multiarc>" * 3  # two tokens, nested three deep
    body = loop().replace('<arc id="e1" source="a" target="t"/>', f'<arc id="e1" source="a" target="t">'
                          f"<inscription>{ok}</inscription></arc>")  # fmt: skip
    assert from_pnml(pnml(body)).pre.tolist() == [[2]]


# ---- srepr: an explicit allowlist --------------------------------------------------------------------
def test_the_allowlist_is_numbers_symbols_arithmetic_and_exp():
    assert SREPR_CLASSES == ("Symbol", "Integer", "Rational", "Float", "Add", "Mul", "Pow", "exp")
    assert SREPR_CONSTANTS == ("pi", "E")


@pytest.mark.parametrize(
    "text",
    [
        "factorial(Integer(100000000))",
        "Sum(Symbol('j'), Tuple(Symbol('j'), Integer(1), Integer(10**9)))",
        "binomial(Integer(10000000), Integer(5000000))",
        "Function('f')(Symbol('x'))",
        "Integral(Symbol('x'), Symbol('x'))",
        "primepi(Integer(10**12))",
        "Lambda(Symbol('x'), Symbol('x'))",
        "Float('1.5', precision=100000000)",
        "Float('1e100000', precision=53)",
        "exp(Float('1e300', precision=53))",
        "Pow(Integer(10), Integer(1000000000))",
        "Pow(Pow(Integer(10), Integer(1000)), Integer(1000))",
        "Rational(1, 0)",
        "Symbol('x', positive='yes')",
        "Symbol(Integer(1))",
        "Integer(1.5)",
        "oo",
        "zoo",
        "Add(Symbol('x'), Float('inf', precision=53))",
    ],
)
def test_anything_that_computes_is_refused_quickly(text):
    start = time.perf_counter()
    with pytest.raises(InvalidParameterError, match="^rate: "):
        parse_srepr("rate", text)
    assert time.perf_counter() - start < 1.0


def test_long_texts_are_refused_unread():
    text = "Add(" + ", ".join(["Integer(1)"] * 20_000) + ")"
    assert len(text) == 4 + 20_000 * len("Integer(1)") + 19_999 * 2 + 1
    with pytest.raises(
        InvalidParameterError, match="^rate: got '240,003 characters'; accepted: at most 100,000"
    ):
        parse_srepr("rate", text)


def test_the_allowlist_still_reads_what_to_pnml_writes():
    x = sympy.Symbol("x", positive=True)
    for expr in (
        2 * x,
        x / 3 + sympy.Rational(1, 7),
        0.25 * x**2,
        sympy.exp(-x) * sympy.pi,
        sympy.sqrt(2) * x,
    ):
        assert parse_srepr("rate", sympy.srepr(expr)) == expr
    assert parse_srepr("rate", "Pow(Integer(2), Integer(1000))") == 2**1000  # 1001 bits: allowed


def test_factorial_rate_in_a_pnml_file_is_refused_quickly():
    start = time.perf_counter()
    with pytest.raises(InvalidParameterError, match="^PNML transition 't' rate: got 'factorial"):
        from_pnml(pnml(loop("factorial(Integer(100000000))", ' format="srepr"')))
    assert time.perf_counter() - start < 1.0


# ---- symbolic rates are positive ---------------------------------------------------------------------
def test_negative_symbolic_rates_are_refused_in_the_builder():
    x, y = sympy.symbols("x y")  # no assumptions: every symbol of a rate stands for a positive quantity
    net = PetriNet("n")
    net.place("a", tokens=1)
    for bad in (-x, -2 * x / y, -(x**2)):
        with pytest.raises(InvalidParameterError, match="^transition 't' rate: got .*<= 0 for all of them"):
            net.timed("t", rate=bad, inputs={"a": 1}, outputs={"a": 1})
    with pytest.raises(
        InvalidParameterError, match=r"^transition 't' rate: got -3\*z; accepted: a finite number > 0"
    ):
        net.timed("t", rate=-3 * sympy.Symbol("z", positive=True), inputs={"a": 1})  # SymPy proves it < 0
    with pytest.raises(InvalidParameterError, match="is declared non-positive"):
        net.timed("t", rate=sympy.Symbol("w", negative=True) ** 2, inputs={"a": 1})
    with pytest.raises(InvalidParameterError, match="^transition 'i' weight: got -x"):
        net.immediate("i", inputs={"a": 1}, weight=-x)
    net.timed("t", rate=x - y, inputs={"a": 1}, outputs={"a": 1})  # positive when x > y: accepted
    assert net.rates.tolist() == [x - y]


def test_negative_symbolic_rate_in_pnml_is_refused():
    text = pnml(loop("Mul(Integer(-1), Symbol('x'))", ' format="srepr"'))
    with pytest.raises(
        InvalidParameterError, match=r"^PNML transition 't' rate: got -x; accepted: a number > 0"
    ):
        from_pnml(text)
    x = sympy.Symbol("x")
    net = from_pnml(pnml(loop("Mul(Integer(2), Symbol('x'))", ' format="srepr"')))
    assert net.rates.tolist() == [2 * x]
    # one place, one self-loop transition: it fires at its rate, so its throughput is the rate, 2x
    assert sympy.simplify(net.solve(symbolic=True).throughput("t") - 2 * x) == 0


# ---- encodings and arc multiplicities --------------------------------------------------------------------
def test_an_unknown_encoding_is_named():
    with pytest.raises(
        InvalidParameterError,
        match=r"^PNML text encoding: got 'unknown encoding: bogus-enc'; accepted: a PNML document in an "
        r"encoding Python knows",
    ):
        PetriNet.from_pnml(b'<?xml version="1.0" encoding="bogus-enc"?><pnml/>')


@pytest.mark.parametrize(
    ("inscription", "got"),
    [("9" * 400, "an integer of 400 digits"), (str(2**31), str(2**31))],
    ids=["400 nines", "2**31"],
)
def test_arc_multiplicities_past_2_31_are_refused_naming_the_arc(inscription, got):
    # The bound of a place's tokens, 2**31 - 1 (markings and arcs are int arrays): 400 nines loaded,
    # then net.pre raised OverflowError.
    text = pnml(
        '<place id="a"/><transition id="t"/>'
        f'<arc id="e" source="a" target="t"><inscription><text>{inscription}</text></inscription></arc>'
    )
    with pytest.raises(
        InvalidParameterError,
        match=rf"^PNML arc 'e' inscription: got {got}; accepted: an integer >= 1, at most 2,147,483,647$",
    ):
        PetriNet.from_pnml(text, default_rate=1.0)
    top = pnml(
        '<place id="a"/><transition id="t"/>'
        f'<arc id="e" source="a" target="t"><inscription><text>{2**31 - 1}</text></inscription></arc>'
    )
    assert PetriNet.from_pnml(top, default_rate=1.0).pre.tolist() == [[2**31 - 1]]


def test_arc_multiplicities_past_2_31_are_refused_in_the_builder():
    net = PetriNet("big")
    net.place("a")
    with pytest.raises(
        InvalidParameterError,
        match=r"^transition 't' inputs\['a'\]: got an integer of 401 digits; accepted: an integer >= 1, "
        r"at most 2,147,483,647$",
    ):
        net.timed("t", 1.0, inputs={"a": 10**400})
    with pytest.raises(InvalidParameterError, match=r"^transition 'u' inhibitors\['a'\]: got 2147483648;"):
        net.immediate("u", inhibitors={"a": 2**31})
    assert "t" not in net.transitions and "u" not in net.transitions
