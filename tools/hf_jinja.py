"""hf_jinja.py — what tools/render_chat.py and tools/render_jinja.py share: Jinja2 set up as Hugging Face's
apply_chat_template sets it up (transformers utils/chat_template_utils.py, _compile_jinja_template:
ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, raise_exception, strftime_now, tojson =
json.dumps(ensure_ascii=False); its AssistantTracker extension only adds {% generation %}, which the templates
rendered here do not use), the variables apply_chat_template passes, a render's outcome as a fixture records it,
and the message builders of the fixture conversations. Test tooling only (needs Debian python3-jinja2)."""
import json
from datetime import datetime, timezone

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


class RaisedByTemplate(Exception):
    """The template called raise_exception(message)."""


def make_env(now=None):
    """The Jinja environment of transformers' chat template utilities. strftime_now formats the current local
    time, or when now (seconds since the epoch) is given that fixed time in UTC, so that renders are reproducible."""
    def raise_exception(message):
        raise RaisedByTemplate(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return (datetime.now() if now is None else datetime.fromtimestamp(now, timezone.utc)).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def chat_vars(inp, empty_tools=True):
    """The variables of a fixture input: messages, add_generation_prompt (default False), tools (when present; with
    empty_tools False only when a non-empty list), enable_thinking (when present), then each key of
    chat_template_kwargs (when present) as a variable of its own, set last as llama.cpp's server sets them."""
    kwargs = {"messages": inp["messages"], "add_generation_prompt": inp.get("add_generation_prompt", False)}
    if "tools" in inp and (empty_tools or inp["tools"]):
        kwargs["tools"] = inp["tools"]
    if "enable_thinking" in inp:
        kwargs["enable_thinking"] = inp["enable_thinking"]
    kwargs.update(inp.get("chat_template_kwargs", {}))
    return kwargs


def outcome(render, errors=(TemplateError, TypeError)):
    """A fixture's record of render(): {"expected": text}, or the error: {"error": message, "error_kind":
    "raise_exception"} when the template raised one, {"error": "Type: message", "error_kind": "jinja"} for the
    exception types in errors (others propagate)."""
    try:
        return {"expected": render()}
    except RaisedByTemplate as e:
        return {"error": str(e), "error_kind": "raise_exception"}
    except errors as e:
        return {"error": "%s: %s" % (type(e).__name__, e), "error_kind": "jinja"}


GEN_PROMPT = {"add_generation_prompt": True}


class Cases(list):
    """Fixture conversations, each {"name", "messages", variables...}."""

    def add(self, name, messages, **variables):
        self.append(dict({"name": name, "messages": messages}, **variables))


def U(text, **kw):
    return dict({"role": "user", "content": text}, **kw)


def A(text, **kw):
    return dict({"role": "assistant", "content": text}, **kw)


def S(text):
    return {"role": "system", "content": text}


def T(text):
    return {"role": "tool", "content": text}


def call(name, args, wrap=True):
    """A tool call: {"type": "function", "function": {"name", "arguments" (unless None)}}, or without wrap the
    bare function object."""
    fn = {"name": name} if args is None else {"name": name, "arguments": args}
    return {"type": "function", "function": fn} if wrap else fn
