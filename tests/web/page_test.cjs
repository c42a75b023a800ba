// page_test.cjs URL — the chat page of `loom serve` in a real browser: Debian's chromium driven by npm
// playwright-core (no browser download). The model's name and the context use shown; a message sent and its
// answer streamed in (at temperature 0, the API's own answer); thinking shown collapsed; the stop button ending a
// long answer, the server then free for the next message; nothing loaded from elsewhere. Prints "N passed, N failed".
const { chromium } = require("playwright-core"); // found through NODE_PATH (tests/cli/test_web.sh)

const url = process.argv[2];
let passed = 0, failed = 0;
function check(what, cond, detail = "") {
  if (cond) passed++;
  else { failed++; console.log(`FAIL: ${what}${detail ? "\n    | " + detail : ""}`); }
}

async function main() {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
                                          args: ["--no-sandbox", "--headless=new"] });
  try {
    const page = await browser.newPage();
    const elsewhere = [];
    page.on("request", (r) => { if (!r.url().startsWith(url)) elsewhere.push(r.url()); });
    await page.goto(url);
    await page.waitForFunction(() => document.getElementById("model").textContent.endsWith(".gguf"), null,
                               { timeout: 30000 });
    check("the model's name is shown", (await page.textContent("#model")).endsWith(".gguf"));

    // a message at temperature 0, thinking off: the streamed answer is the API's
    await page.fill("#temperature", "0");
    await page.fill("#max_tokens", "12");
    await page.uncheck("#thinking");
    await page.fill("#input", "Tell me a story");
    await page.click("#send");
    await page.waitForSelector(".assistant[data-done]", { timeout: 60000 });
    const shown = await page.textContent(".assistant .content");
    const api = await page.evaluate(async () => {
      const r = await fetch("/v1/chat/completions", { method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "Tell me a story" }], temperature: 0, top_p: 0.95,
                               max_tokens: 12, chat_template_kwargs: { enable_thinking: false } }) });
      return (await r.json()).choices[0].message.content;
    });
    check("the answer streams into the page, the API's text", shown.length > 0 && shown === api, `${shown} vs ${api}`);
    check("the context use is shown", /^context \d+ \/ \d+$/.test(await page.textContent("#ctx")),
          await page.textContent("#ctx"));

    // thinking on: the reasoning goes into a collapsed block
    await page.click("#clear");
    await page.check("#thinking");
    await page.fill("#input", "Why is the sky blue?");
    await page.click("#send");
    await page.waitForSelector(".assistant[data-done]", { timeout: 60000 });
    const think = await page.$eval(".assistant details.thinking",
                                   (d) => ({ hidden: d.hidden, open: d.open, text: d.textContent }));
    check("thinking is shown, collapsed", !think.hidden && !think.open && think.text.length > "Thinking".length,
          JSON.stringify(think));

    // stop: a long answer ended by the button; the one slot is free for the next message
    await page.click("#clear");
    await page.uncheck("#thinking");
    await page.fill("#max_tokens", "100000");
    await page.fill("#input", "Write a very long essay");
    await page.click("#send");
    await page.waitForFunction(() => document.querySelector(".assistant .content").textContent.length > 20, null,
                               { timeout: 60000 });
    await page.click("#stop");
    await page.waitForSelector(".assistant[data-done]", { timeout: 30000 });
    check("stop ends the answer", (await page.getAttribute(".assistant", "data-stopped")) === "1" &&
          !(await page.isDisabled("#send")) && (await page.isDisabled("#stop")));
    await page.fill("#max_tokens", "8");
    await page.fill("#input", "Hello");
    await page.click("#send");
    await page.waitForFunction(() => document.querySelectorAll(".assistant[data-done]").length === 2, null,
                               { timeout: 60000 });
    const after = await page.$$eval(".assistant .content", (c) => c[1].textContent);
    check("after a stop the next message is answered", after.length > 0, after);
    check("nothing is loaded from elsewhere", elsewhere.length === 0, elsewhere.join(" "));
  } finally {
    await browser.close();
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.log(`FAIL: ${e.message}\n${passed} passed, ${failed + 1} failed`);
  process.exit(1);
});
