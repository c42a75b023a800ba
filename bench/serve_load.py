#!/usr/bin/env python3
# serve_load.py URL CLIENTS REQUESTS MAX_TOKENS — load on an OpenAI-compatible server (loom serve or llama.cpp's
# llama-server): CLIENTS threads each send REQUESTS streaming chat requests in turn (different prompts, thinking
# off, greedy, MAX_TOKENS each); prints one JSON line: completion tokens (the servers' usage), wall time,
# aggregate tokens/s, and time to first token p50/p95 (request sent to the first streamed text). Standard library
# only. A benchmark tool, not a test.
import http.client
import json
import sys
import threading
import time
from urllib.parse import urlparse

url, clients, requests, max_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
host = urlparse(url)
TOPICS = ["the sea", "a lighthouse", "bread", "winter", "a violin", "trains", "the moon", "gardens", "a clock",
          "mountains", "libraries", "rain", "bees", "a bridge", "lanterns", "rivers"]


def one(i, out):
    body = {"messages": [{"role": "user", "content": f"Write a short story about {TOPICS[i % len(TOPICS)]}."}],
            "stream": True, "stream_options": {"include_usage": True}, "temperature": 0, "max_tokens": max_tokens,
            "chat_template_kwargs": {"enable_thinking": False}}
    c = http.client.HTTPConnection(host.hostname, host.port, timeout=600)
    t0 = time.time()
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    first, tokens, deltas, buf = None, None, 0, b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            line, buf = buf.split(b"\n\n", 1)
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ev.get("usage"):
                tokens = ev["usage"]["completion_tokens"]
            for ch in ev.get("choices") or []:
                d = ch.get("delta") or {}
                if d.get("content") or d.get("reasoning_content"):
                    deltas += 1
                    first = first or time.time()
    c.close()
    out.append({"ttft": (first or time.time()) - t0, "tokens": tokens if tokens is not None else deltas})


def client(k, out):
    for j in range(requests):
        one(k * requests + j, out)


results = []
threads = [threading.Thread(target=client, args=(k, results)) for k in range(clients)]
t0 = time.time()
for t in threads:
    t.start()
for t in threads:
    t.join()
wall = time.time() - t0
ttft = sorted(x["ttft"] for x in results)
pick = lambda q: ttft[min(len(ttft) - 1, int(q * len(ttft)))] if ttft else 0
total = sum(x["tokens"] for x in results)
print(json.dumps({"clients": clients, "requests": len(results), "tokens": total, "wall_s": round(wall, 2),
                  "tok_s": round(total / wall, 2), "ttft_p50_s": round(pick(0.5), 3), "ttft_p95_s": round(pick(0.95), 3)}))
