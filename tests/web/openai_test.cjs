// openai_test.cjs URL KEY — `loom serve` driven by the official OpenAI client from npm (`openai`, the version
// scripts/setup.sh pins): chat non-streaming and streaming agree at temperature 0; text completions; a tool call
// (the answer forced: the server runs with LOOM_SERVE_FORCED_OUTPUT=1) as the client's own types and its stream
// helper assemble it; a refused field as the client's APIError naming it. Prints "N passed, N failed".
const { OpenAI } = require("openai"); // found through NODE_PATH (tests/cli/test_web.sh)

const [url, key] = process.argv.slice(2);
let passed = 0, failed = 0;
function check(what, cond, detail = "") {
  if (cond) passed++;
  else { failed++; console.log(`FAIL: ${what}${detail ? "\n    | " + detail : ""}`); }
}

const TOOLS = [{ type: "function", function: { name: "get_weather", description: "The weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } } } } }];
const CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n2\n" +
             "</parameter>\n</function>\n</tool_call>";

async function main() {
  const client = new OpenAI({ baseURL: url + "v1", apiKey: key, maxRetries: 0 });
  const ask = { model: "loom", messages: [{ role: "user", content: "Tell me a story" }], temperature: 0,
                max_tokens: 16, chat_template_kwargs: { enable_thinking: false } };
  const full = await client.chat.completions.create(ask);
  const text = full.choices[0].message.content;
  check("chat: an answer, finish_reason length, usage", text.length > 0 && full.choices[0].finish_reason === "length" &&
        full.usage.completion_tokens === 16, JSON.stringify(full));
  let streamed = "", last = null;
  for await (const chunk of await client.chat.completions.create({ ...ask, stream: true })) {
    if (chunk.choices.length) {
      streamed += chunk.choices[0].delta.content || "";
      last = chunk.choices[0].finish_reason || last;
    }
  }
  check("chat: streaming gives the same text", streamed === text && last === "length", `${streamed} vs ${text}`);

  const comp = await client.completions.create({ model: "loom", prompt: "Once upon a time", temperature: 0,
                                                 max_tokens: 8 });
  check("completions: an answer", comp.choices[0].text.length > 0 && comp.usage.completion_tokens === 8,
        JSON.stringify(comp));

  const toolAsk = { ...ask, tools: TOOLS, max_tokens: 100, forced_output: CALL };
  const tc = await client.chat.completions.create(toolAsk);
  const call = tc.choices[0].message.tool_calls && tc.choices[0].message.tool_calls[0];
  check("a tool call as the client reads it", tc.choices[0].finish_reason === "tool_calls" && call &&
        call.function.name === "get_weather" && JSON.parse(call.function.arguments).days === 2,
        JSON.stringify(tc.choices[0]));
  const runner = client.chat.completions.stream(toolAsk);
  const final = await runner.finalChatCompletion();
  const scall = final.choices[0].message.tool_calls && final.choices[0].message.tool_calls[0];
  check("a streamed tool call assembled by the client's stream helper", scall && call &&
        scall.function.name === call.function.name && scall.function.arguments === call.function.arguments &&
        final.choices[0].finish_reason === "tool_calls", JSON.stringify(final.choices[0]));

  try {
    await client.chat.completions.create({ ...ask, temperature: 7 });
    check("a value out of range is refused", false);
  } catch (e) {
    check("a value out of range: the client's APIError, 400, naming the field", e.status === 400 &&
          e.param === "temperature", `${e.status} ${e.param} ${e.message}`);
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.log(`FAIL: ${e.message}\n${passed} passed, ${failed + 1} failed`);
  process.exit(1);
});
