import pytest

from engine.harness.interfaces import INTERFACES, Call, ParseError, get_interface

CALLS = [Call("living_room.light.set_brightness", {"brightness": 40}), Call("error_input")]


@pytest.mark.parametrize("name", ["json", "xml", "tool_call"])
def test_render_then_parse_gives_the_calls_back(name):
    iface = get_interface(name)
    assert iface.parse(iface.render(CALLS)) == CALLS


@pytest.mark.parametrize("name", INTERFACES.names())
def test_every_interface_rejects_the_others_formats(name):
    iface = get_interface(name)
    for other in INTERFACES.names():
        if other != name:
            with pytest.raises(ParseError):
                iface.parse(get_interface(other).render(CALLS), strict=True)


def test_strict_rejects_surrounding_prose_that_lenient_accepts():
    iface = get_interface("json")
    text = "Sure! Here you go:\n```json\n" + iface.render(CALLS) + "\n```"
    with pytest.raises(ParseError):
        iface.parse(text, strict=True)
    assert iface.parse(text, strict=False) == CALLS


@pytest.mark.parametrize("text, reason", [
    ('{"name": "x", "args": {}}', "expected a JSON array"),
    ('[{"name": "x", "arguments": {}}]', "unexpected key"),
    ('[{"name": "", "args": {}}]', "non-empty string"),
    ('[{"name": "x", "args": [1]}]', "must be an object"),
    ("[]", "no call"),
    ('[{"name": "x", "args": {}', "not valid JSON"),
])
def test_json_schema_violations_are_named(text, reason):
    with pytest.raises(ParseError, match=reason):
        get_interface("json").parse(text)


def test_xml_refuses_entities_and_wrong_elements():
    iface = get_interface("xml")
    with pytest.raises(ParseError, match="DOCTYPE"):
        iface.parse('<!DOCTYPE x [<!ENTITY a "b">]><calls><call name="a"/></calls>')
    with pytest.raises(ParseError, match="<call name"):
        iface.parse("<calls><tool name='a'/></calls>")
    assert iface.parse('<calls><call name="a.b.c"><arg name="v">7</arg></call></calls>') == [Call("a.b.c", {"v": 7})]


def test_tool_call_strict_rejects_text_between_blocks():
    iface = get_interface("tool_call")
    text = iface.render(CALLS[:1]) + "\nand also\n" + iface.render(CALLS[1:])
    with pytest.raises(ParseError, match="outside"):
        iface.parse(text, strict=True)
    assert iface.parse(text, strict=False) == CALLS


@pytest.mark.parametrize("name", ["json", "xml", "tool_call"])
def test_leading_calls_reads_the_whole_calls_an_answer_cut_anywhere_starts_with(name):
    """What constrained decoding closes a run-on answer after: at every cut, the calls wholly written so far,
    each with where it ends; a call that is not one stops the reading."""
    iface = get_interface(name)
    calls = [Call("kitchen.light.turn_on"), Call("oven.set_mode", {"mode": 1}), Call("error_input")]
    text = " " + iface.render(calls)
    read = [iface.leading_calls(text[:k]) for k in range(len(text) + 1)]
    assert [c for c, _ in read[-1]] == calls
    for k, found in enumerate(read):
        assert [c for c, _ in found] == calls[:len(found)] and all(end <= k for _, end in found)
        assert len(found) == sum(end <= k for _, end in read[-1])  # a call counts as soon as it is whole
    assert iface.leading_calls("Sure: " + iface.render(calls)) == []


@pytest.mark.parametrize("name, text", [
    ("json", '[{"name": "a", "args": {}}, {"mode": "b", "args": {}}, {"name": "c"}]'),
    ("xml", '<calls><call name="a"></call><call><arg name="x">1</arg></call><call name="c"></call></calls>'),
    ("tool_call", '<tool_call>{"name": "a", "arguments": {}}</tool_call>\n<tool_call>{"name": "b"}, 1</tool_call>'),
])
def test_leading_calls_stops_at_an_element_that_is_not_a_call(name, text):
    [(call, end)] = get_interface(name).leading_calls(text)
    assert call == Call("a") and text[:end].endswith(("}", "</call>", "</tool_call>"))
