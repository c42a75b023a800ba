#!/usr/bin/env bash
# test_chat_cache.sh BUILD — `loom chat`'s prompt cache across turns on the cached tiny model (its file's ChatML
# template: the generation header ends the render, no think block), in both numerics: every turn after the first
# reuses the previous turn's whole render (/timing's "reused" and "prefill" counts: the previous message is never
# prefilled again), and the greedy answers are a fresh computation's (those `loom serve`, which
# computes canonically, gives the same conversation) and the same in both numerics on this model; and every option
# of chat's table taken by a branch of its own (none read as another). Prints "N passed, N failed".
set -uo pipefail
build=${1:-build}
exec timeout 600 python3 - "$(realpath "$build/loom")" \
    "${LOOM_CACHE:-$HOME/.cache/loom}/models/qwen35-tiny-Q4_K_M.gguf" <<'EOF'
import http.client
import json
import re
import subprocess
import sys

LOOM, MODEL = sys.argv[1], sys.argv[2]
TURNS = ["Hello there", "Tell me more", "And more please", "One more turn"]
passed = failed = 0


def check(what, cond, detail=""):
    global passed, failed
    passed += bool(cond)
    failed += not cond
    if not cond:
        print(f"FAIL: {what}" + (f"\n    | {detail}" if detail else ""), flush=True)


def chat(numerics):
    """The answers, and per turn (reused, prefilled) from /timing."""
    stdin = "".join(t + "\n/timing\n" for t in TURNS)
    p = subprocess.run([LOOM, "chat", "-m", MODEL, "--temp", "0", "-n", "8", "-t", "1", "--numerics", numerics],
                       input=stdin, capture_output=True, text=True, timeout=120)
    turns = [(int(m.group(2)), int(m.group(1))) for m in re.finditer(
        r"^last turn: prefill (\d+) tokens .*?, (\d+) reused from the session", p.stderr, re.M)]
    return p.returncode, p.stdout.split("\n")[:-1], turns, p.stderr


answers = {}
for numerics in ("canonical", "reference"):
    rc, out, turns, err = chat(numerics)
    answers[numerics] = out
    check(f"{numerics}: {len(TURNS)} turns answered", rc == 0 and len(out) == len(TURNS) and len(turns) == len(TURNS),
          f"{rc} {out} {err[-300:]}")
    for k in range(1, len(turns)):
        rendered_before = turns[k - 1][0] + turns[k - 1][1]  # the previous turn's render: reused + prefilled
        check(f"{numerics}: turn {k + 1} reuses turn {k}'s whole render (prefills only what is new)",
              turns[k][0] >= rendered_before, f"turns (reused, prefilled): {turns}")
check("the greedy answers are the same in both numerics on this model", answers["canonical"] == answers["reference"],
      str(answers))

# the same conversation through `loom serve`: each turn's answer from the messages before it
srv = subprocess.Popen([LOOM, "serve", "-m", MODEL, "--port", "0", "-t", "1"], stderr=subprocess.PIPE, text=True)
port = None
for line in srv.stderr:
    m = re.search(r"listening on http://[^:]+:(\d+)", line)
    if m:
        port = int(m.group(1))
        break
msgs, served = [], []
for k, text in enumerate(TURNS if port else []):
    msgs.append({"role": "user", "content": text})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", "/v1/chat/completions", json.dumps({"messages": msgs, "temperature": 0, "max_tokens": 8}),
              {"Content-Type": "application/json"})
    body = json.loads(c.getresponse().read())
    c.close()
    served.append(body["choices"][0]["message"]["content"] if "choices" in body else str(body))
    msgs.append({"role": "assistant", "content": served[-1]})
srv.terminate()
srv.wait(60)
check("chat's cached turns give the answers of a fresh computation (loom serve, the same messages)",
      served == answers["canonical"], f"{served} vs {answers['canonical']}")
# every option of chat's table is taken by its own branch: given with a valid value before --help, none refused
for opt, val in (("-m", MODEL), ("-n", "4"), ("-t", "1"), ("-c", "64"), ("--numerics", "reference"),
                 ("--chat-template-file", MODEL), ("--temp", "0.5"), ("--seed", "3"), ("--top-k", "5"),
                 ("--top-p", "0.9"), ("--min-p", "0.1"), ("--repeat-penalty", "1.1"), ("--repeat-last-n", "8"),
                 ("--presence-penalty", "0.5"), ("--frequency-penalty", "0.5"), ("--stop", "x")):
    p = subprocess.run([LOOM, "chat", opt, val, "--help"], capture_output=True, text=True, timeout=60)
    check(f"chat {opt} {val} --help: the option is taken", p.returncode == 0 and "usage: loom chat" in p.stdout and
          not p.stderr, f"{p.returncode} {p.stderr[-300:]}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
EOF
