#!/usr/bin/python3
"""render_chat.py — regenerate tests/fixtures/chat/qwen35.json: conversations rendered by the official
Qwen3.5 chat template (models/templates/Qwen3.5-4B.jinja in the reference) with Jinja2 set up as Hugging Face's
apply_chat_template sets it up (transformers utils/chat_template_utils.py: ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols, raise_exception, strftime_now, tojson = json.dumps(ensure_ascii=False);
its AssistantTracker extension only adds {% generation %}, which this template does not use). Test tooling only: loom's tests read the committed fixture and never
run Python. Usage: /usr/bin/python3 tools/render_chat.py [TEMPLATE] [OUT] (needs Debian python3-jinja2).

Each case records its origin: "template" (the expected text is the template's render of the case's own input)
or "contract" (loom's input differs from what the template accepts; the expected text is the template's render
of the equivalent input recorded in "template_input")."""
import copy
import json
import os
import sys

import jinja2

from hf_jinja import GEN_PROMPT, A, Cases, S, T, U, call, chat_vars, make_env, outcome

HOME = os.path.expanduser("~")
REF = os.environ.get("LOOM_REF", os.path.join(os.environ.get("LOOM_CACHE", HOME + "/.cache/loom"), "ref"))
TEMPLATE = os.path.join(REF, "src/models/templates/Qwen3.5-4B.jinja")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests/fixtures/chat/qwen35.json")


def render(template, inp):
    return outcome(lambda: template.render(**chat_vars(inp)))


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "days": {"type": "integer", "minimum": 1, "maximum": 14}}, "required": ["city"]}}}
ODD_TOOL = {"type": "function", "function": {
    "name": "echo", "description": "Quotes \" backslash \\ newline \n tab \t bell \u0007 del \u007f é 日本 😀 </tools>",
    "parameters": {"type": "object", "properties": {"x": {"type": "number", "default": 0.1}}, "nested": [[], {}]}}}
NUMS = {"one": 1.0, "tenth": 0.1, "tiny": 1e-7, "small": 2.5e-05, "e4": 0.0001, "big": 1e20, "e16": 1e16,
        "e15": 1e15, "negz": -0.0, "int": 123456789012345678, "neg": -42, "third": 1 / 3, "pi": 3.141592653589793}
ARGS = {"city": "Paris", "days": 3, "ratio": 0.5, "metric": True, "night": False, "unit": None,
        "tags": ["a", "b"], "where": {"lat": 48.85, "lon": 2.35}, "text": "line 1\nline 2"}
UWS = "\u3000\u00a0\u2028\u0085\u2000\u205f "
FS = "\u001c\u001d\u001e\u001f"


def cases():
    c = Cases()
    add, gp = c.add, GEN_PROMPT
    add("user_only_think_unset", [U("Hello")], **gp)
    add("user_only_think_on", [U("Hello")], enable_thinking=True, **gp)
    add("user_only_think_off", [U("Hello")], enable_thinking=False, **gp)
    add("user_only_no_generation_prompt", [U("Hello")])
    add("user_only_think_off_no_generation_prompt", [U("Hello")], enable_thinking=False)
    add("system_user", [S("You are terse."), U("Hi there")], **gp)
    add("system_empty", [S(""), U("Hi")], **gp)
    add("system_null_content", [{"role": "system", "content": None}, U("Hi")], **gp)
    add("ascii_whitespace_edges", [S("\n\t  sys \t\n"), U("  \r\n user text \n\n"), A(" \n answer \t")], **gp)
    add("unicode_whitespace_edges", [S(UWS + "sys" + UWS), U(UWS + "user\u200b" + UWS), A("\ufeffans" + UWS)], **gp)
    add("fs_gs_rs_us_edges", [S(FS + "sys" + FS), U(FS + " user " + FS), A(FS + "answer" + FS),
                              U("x" + FS + "y")], **gp)
    add("multi_turn", [U("What is 2+2?"), A("4"), U("And 3+3?")], **gp)
    add("multi_turn_think_off", [U("What is 2+2?"), A("4"), U("And 3+3?")], enable_thinking=False, **gp)
    add("reasoning_content_after_last_user", [U("Q"), A("Answer.", reasoning_content="Let me think.")])
    add("reasoning_content_before_last_user", [U("Q1"), A("A1", reasoning_content="R1"), U("Q2")], **gp)
    add("think_in_content_before_last_user", [U("Q1"), A("<think>\nR1\n</think>\n\nA1"), U("Q2")], **gp)
    add("think_in_content_after_last_user", [U("Q1"), A("<think>\nR1 secret\n</think>\n\nA1")])
    add("close_think_without_open", [U("Q"), A("reasoning here\n</think>\n\nfinal")])
    add("several_think_tags", [U("Q"), A("<think>a</think>b<think>\n\nc\n\n</think>\n\n\nd</think>e")])
    add("reasoning_content_empty_keeps_content", [U("Q"), A("x</think>y", reasoning_content="")])
    add("reasoning_content_whitespace", [U("Q"), A("final", reasoning_content="\n\n  r  \n\n")], **gp)
    add("reasoning_both_sides_think_on", [U("Q1"), A("A1", reasoning_content="R1"), U("Q2"),
                                          A("A2", reasoning_content="R2")], enable_thinking=True)
    add("tools_user", [U("Weather in Paris?")], tools=[WEATHER], **gp)
    add("tools_system", [S("Be helpful."), U("Weather in Paris?")], tools=[WEATHER, ODD_TOOL], **gp)
    add("tools_empty_system", [S("  "), U("Weather?")], tools=[WEATHER], **gp)
    add("tools_empty_list", [U("Hi")], tools=[], **gp)
    add("tool_call_no_content", [U("Weather?"), A("", tool_calls=[call("get_weather", ARGS)])], **gp)
    add("tool_call_with_content", [U("Weather?"), A("Let me check.", tool_calls=[call("get_weather", {"city": "Oslo"})])])
    add("tool_call_whitespace_content", [U("Weather?"), A(" \n ", tool_calls=[call("get_weather", {"city": "Oslo"})])])
    add("tool_calls_several", [U("Weather?"), A("Checking both.", tool_calls=[
        call("get_weather", {"city": "Oslo"}), call("get_weather", {"city": "Rome", "days": 2})])])
    add("tool_call_unwrapped", [U("Weather?"), A(None, tool_calls=[call("get_weather", {"city": "Oslo"}, False)])])
    add("tool_call_no_arguments", [U("Time?"), A("", tool_calls=[call("now", None)])], **gp)
    add("tool_call_number_formats", [U("n"), A("", tool_calls=[call("nums", NUMS)])])
    add("tool_responses_grouped", [U("Weather in Oslo and Rome?"), A("", tool_calls=[
        call("get_weather", {"city": "Oslo"}), call("get_weather", {"city": "Rome"})]),
        T("{\"temp\": 3}"), T("{\"temp\": 18}")], tools=[WEATHER], **gp)
    add("multi_step_tools", [S("sys"), U("Plan a trip"),
                             A("", reasoning_content="need weather", tool_calls=[call("get_weather", {"city": "Oslo"})]),
                             T("cold"),
                             A("More.", reasoning_content="need more", tool_calls=[call("get_weather", {"city": "Rome"}),
                                                                                   call("get_weather", {"city": "Nice"})]),
                             T("warm"), T("mild"),
                             A("Go to Rome.", reasoning_content="Rome is warm"),
                             U("Thanks. And tomorrow?"),
                             A("<think>\nagain\n</think>\n\n", tool_calls=[call("get_weather", {"city": "Rome", "days": 1})]),
                             T("sunny")], tools=[WEATHER], **gp)
    add("multi_step_tools_think_off", [U("Weather?"), A("", tool_calls=[call("get_weather", {"city": "Oslo"})]),
                                       T("cold")], tools=[WEATHER], enable_thinking=False, **gp)
    add("user_tool_response_not_query", [U("real question"), A("calling", reasoning_content="r1"),
                                         U("<tool_response>\nresult\n</tool_response>"),
                                         A("done", reasoning_content="r2")])
    add("tool_message_first", [T("orphan result"), U("Q")], **gp)
    add("tool_between_users", [U("Q1"), T("r"), U("Q2")], **gp)
    add("literal_controls_user", [U("<|im_start|>Hello World<|im_end|>")], **gp)
    add("literal_controls_system", [S("<|im_end|>\n<|im_start|>system\nfake</think>"), U("Hi <think>")], **gp)
    add("literal_controls_assistant", [U("Q"), A("<|im_end|><|im_start|>user\n<tool_call>x</tool_call>"), U("Q2")], **gp)
    add("literal_controls_tool", [U("Q"), A("", tool_calls=[call("f", {"a": "</parameter><|im_end|>"})]),
                                  T("</tool_response><|im_end|><|endoftext|>")], **gp)
    add("literal_controls_reasoning", [U("Q"), A("ok", reasoning_content="<|im_start|>assistant\n</think>")])
    add("literal_controls_tool_names", [U("Q"), A("", tool_calls=[call("<|im_end|>", {"<|im_start|>": "<think>"})])])
    add("multilingual", [U("नमस्ते दुनिया — 你好，世界 — 안녕하세요 — مرحبا — สวัสดี — 👩🏽‍💻🇫🇷"),
                         A("e\u0301 vs \u00e9")], **gp)
    add("crlf_content", [U("line1\r\nline2\r\n"), A("a\r\n\r\nb")], **gp)
    add("null_user_content", [{"role": "user", "content": None}], **gp)
    add("error_no_messages", [], **gp)
    add("error_only_system", [S("sys")], **gp)
    add("error_system_not_first", [U("Q"), S("late system")], **gp)
    add("error_unexpected_role", [U("Q"), {"role": "developer", "content": "x"}], **gp)
    add("error_only_tool_response_users", [U("<tool_response>x</tool_response>")], **gp)
    add("error_only_assistant", [A("hi")], **gp)
    add("error_tool_call_without_name", [U("Q"), A("", tool_calls=[{"function": {"arguments": {"a": 1}}}])], **gp)
    return c


def contracts():
    """loom-only inputs: tool-call arguments as a JSON string render as the equivalent object."""
    out = []
    for name, args in [("arguments_json_string", {"city": "Paris", "days": 3}),
                       ("arguments_json_string_nested", ARGS),
                       ("arguments_json_string_numbers", NUMS)]:
        base = {"name": name, "messages": [U("Q"), A("", tool_calls=[call("get_weather", args)])],
                "add_generation_prompt": True}
        loom_in = copy.deepcopy(base)
        loom_in["messages"][1]["tool_calls"][0]["function"]["arguments"] = json.dumps(args)
        out.append((loom_in, base,
                    "tool-call arguments given as a JSON string render as the equivalent object (the template "
                    "itself only accepts a mapping); expected text is the template's render of template_input"))
    return out


JSON_SAMPLES = ['0.1', '1.0', '1e-7', '2.5e-05', '0.0001', '1e20', '1e16', '1e15', '-0.0', '123456789012345678',
                '1.7976931348623157e308', '5e-324', '0.30000000000000004', '100.0', '12345.678', 'true', 'false',
                'null', '"a\\"b\\\\c\\n\\u0001\\u007f\u00e9"', '[1, [2.5, {"k": null}], "x"]',
                '{"b": 1, "a": {"z": [], "y": {}}}']


def main():
    tpath = sys.argv[1] if len(sys.argv) > 1 else TEMPLATE
    out = sys.argv[2] if len(sys.argv) > 2 else OUT
    template = make_env().from_string(open(tpath, encoding="utf-8").read())
    fixtures = []
    for case in cases():
        inp = {k: v for k, v in case.items() if k != "name"}
        fixtures.append(dict({"name": case["name"], "origin": "template", "input": inp}, **render(template, inp)))
    for loom_in, tmpl_in, why in contracts():
        name = loom_in.pop("name")
        tmpl_in.pop("name")
        fixtures.append(dict({"name": name, "origin": "contract", "contract": why, "input": loom_in,
                              "template_input": tmpl_in}, **render(template, tmpl_in)))
    json_cases = []
    for s in JSON_SAMPLES:
        v = json.loads(s)
        json_cases.append({"json": s, "dumps": json.dumps(v, ensure_ascii=False),
                           "str": v if isinstance(v, str) else (json.dumps(v, ensure_ascii=False)
                                                                if isinstance(v, (list, dict)) else str(v))})
    doc = {"template": "models/templates/Qwen3.5-4B.jinja", "jinja2": jinja2.__version__,
           "settings": "ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, loopcontrols), "
                       "tojson=json.dumps(ensure_ascii=False), raise_exception",
           "cases": fixtures, "json_python": json_cases}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("%s: %d conversations (%d errors), %d JSON samples" % (
        out, len(fixtures), sum("error" in x for x in fixtures), len(json_cases)))


if __name__ == "__main__":
    main()
