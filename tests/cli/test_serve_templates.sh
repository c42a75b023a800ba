#!/usr/bin/env bash
# test_serve_templates.sh BUILD — `loom serve` and a chat template given by the user (issue 14): a message's
# "name" and every chat_template_kwargs key reach the template (as Hugging Face's apply_chat_template and
# llama.cpp's server pass them); what a render raises or exceeds (raise_exception, a type error, Jinja's 1e6 loop
# iterations or 256 MiB of values) answers 400 with the message and the server keeps serving; a kwarg that would
# replace messages and a non-string name are 400 naming the field; --chat-template-file given twice (two files) refused
# (exit 2), an empty or whitespace-only template file too (exit 1, naming the file). Driven over HTTP with Python's
# standard library on the cached tiny model. Prints "N passed, N failed".
set -uo pipefail
build=${1:-build}
loom=$(realpath "$build/loom")
model=${LOOM_CACHE:-$HOME/.cache/loom}/models/qwen35-tiny-Q4_K_M.gguf
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pass=0 fail=0
err=$dir/err
check() { # description, condition (evaluated)
    if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$err"; fi
}

# A ChatML-like template that prints each message's name, raises when the name is "bob" (showing the kwarg
# "greeting"), and on the kwarg "mode" runs past Jinja's loop or memory limit or adds a string to a number.
cat >"$dir/t.jinja" <<'EOF'
{%- if mode is defined and mode == 'loop' %}{% for i in range(2000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}{% endif %}
{%- if mode is defined and mode == 'memory' %}{% set ns = namespace(s='x' * 1048576) %}{% for i in range(300) %}{% set ns.s = ns.s + 'x' * 1048576 %}{% endfor %}{% endif %}
{%- if mode is defined and mode == 'type' %}{{ messages[0].content + 1 }}{% endif %}
{%- for m in messages %}
{%- if m.name == 'bob' %}{{ raise_exception('seen name ' + m.name + ' and greeting ' + greeting) }}{% endif %}
{{- '<|im_start|>' + m.role + (' ' + m.name if m.name else '') + '\n' + m.content + '<|im_end|>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}
{%- if suffix is defined %}{{ suffix }}{% endif %}
EOF

"$loom" serve -m "$model" --port 0 --chat-template-file "$dir/t.jinja" --chat-template-file "$dir/u.jinja" 2>"$err"
rc=$?
check "--chat-template-file given twice: exit 2, both named" \
    '[ $rc -eq 2 ] && grep -q "^loom serve: --chat-template-file expects one value, found .$dir/t.jinja. and then .$dir/u.jinja. (given twice; loom serve takes one)$" "$err"'
: >"$dir/empty.jinja"
printf ' \n\t\n' >"$dir/blank.jinja"
for f in empty blank; do
    timeout 120 "$loom" serve -m "$model" --port 0 -t 1 --chat-template-file "$dir/$f.jinja" 2>"$err"; rc=$?
    check "an $f --chat-template-file: exit 1 naming the file" \
        '[ $rc -eq 1 ] && grep -q "chat-template-file $dir/$f.jinja: chat template: expected a template, found" "$err"'
done

: >"$err"
out=$(timeout 300 python3 - "$loom" "$model" "$dir/t.jinja" <<'EOF'
import http.client, json, re, subprocess, sys
loom, model, tmpl = sys.argv[1:4]
p = subprocess.Popen([loom, "serve", "-m", model, "--port", "0", "-t", "1", "--chat-template-file", tmpl],
                     stderr=subprocess.PIPE, text=True)
port = None
for line in p.stderr:
    m = re.search(r"listening on http://[^:]+:(\d+)", line)
    if m:
        port = int(m.group(1))
        break
passed = failed = 0


def check(what, cond, detail=""):
    global passed, failed
    passed, failed = passed + bool(cond), failed + (not cond)
    if not cond:
        print("FAIL: %s\n    | %s" % (what, detail))


def chat(messages, **kw):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/chat/completions", json.dumps(dict(messages=messages, temperature=0, max_tokens=2, **kw)),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    body = json.loads(r.read().decode())
    c.close()
    return r.status, body


def error(body):
    return body.get("error", {}).get("message", "") if isinstance(body, dict) else ""


U = [{"role": "user", "content": "hi"}]
st, b = chat([{"role": "user", "content": "hi", "name": "bob"}], chat_template_kwargs={"greeting": "hello"})
check("a name and a kwarg reach the template (its raise_exception: 400 with the message)",
      st == 400 and error(b) == "messages: seen name bob and greeting hello", (st, b))
st0, b0 = chat(U)
st1, b1 = chat([{"role": "user", "content": "hi", "name": "al"}])
check("a message's name is rendered (one token more)", st0 == st1 == 200 and
      b1["usage"]["prompt_tokens"] == b0["usage"]["prompt_tokens"] + 1, (b0, b1))
st2, b2 = chat(U, chat_template_kwargs={"suffix": "<|im_start|>"})
check("a kwarg's value is rendered, as data (the special token's spelling is 6 tokens of text)", st2 == 200 and
      b2["usage"]["prompt_tokens"] == b0["usage"]["prompt_tokens"] + 6, b2)
for mode, text in (("loop", "more than 1000000 loop iterations in one render"),
                   ("memory", "the render exceeds 256 MiB of strings/values"), ("type", "jinja: line 3: ")):
    st, b = chat(U, chat_template_kwargs={"mode": mode})
    check("a render past Jinja's %s limit / error: 400 with the message" % mode,
          st == 400 and text in error(b) and b["error"]["type"] == "invalid_request_error", (st, b))
st, b = chat(U, chat_template_kwargs={"messages": []})
check("a kwarg that would replace messages: 400 naming chat_template_kwargs.messages", st == 400 and
      b["error"]["param"] == "chat_template_kwargs" and "chat_template_kwargs.messages" in error(b), (st, b))
st, b = chat([{"role": "user", "content": "hi", "name": 3}])
check("a name that is no string: 400 naming it", st == 400 and "messages[0].name: expected a string" in error(b),
      (st, b))
st, b = chat(U)
check("still serving after the errors", st == 200, (st, b))
p.terminate()
p.wait(60)
print("%d %d" % (passed, failed))
EOF
)
echo "$out" | sed '$d'
read -r p f <<<"$(echo "$out" | tail -1)"
pass=$((pass + ${p:-0})) fail=$((fail + ${f:-1}))

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
