// Drives the Host's AG-UI endpoint with the official HttpAgent (which runs verifyEvents on every stream): a deploy
// whose approval is denied, then a question whose interrupt is cancelled. Each refused call must get its
// TOOL_CALL_RESULT in the run that resumes it, so the agent's messages hold a tool message for it.
// Arguments: base URL, API token, thread id. Prints a JSON summary; a failed expectation exits non-zero.
import assert from "node:assert/strict";
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [baseUrl, token, threadId] = process.argv.slice(2);
const agent = new HttpAgent({
  url: `${baseUrl}/agui/demo/`,
  headers: { Authorization: `Bearer ${token}` },
  threadId,
});
const refused = [];

async function run(options) {
  let outcome;
  await agent.runAgent(options, {
    onRunFinishedEvent: ({ event }) => {
      outcome = event.outcome?.type;
    },
  });
  return outcome;
}

async function refuse(text, response) {
  agent.addMessage({ id: `user-${agent.messages.length}`, role: "user", content: text });
  assert.equal(await run(), "interrupt");
  const [interrupt] = agent.pendingInterrupts;
  assert.equal(agent.pendingInterrupts.length, 1);
  const resume = buildResumeArray(agent.pendingInterrupts, { [interrupt.id]: response });
  assert.equal(await run({ resume }), "success");
  const result = agent.messages.find((m) => m.role === "tool" && m.toolCallId === interrupt.toolCallId);
  assert.ok(result, `the ${interrupt.reason} call ${interrupt.toolCallId} has its tool message`);
  refused.push({ reason: interrupt.reason, toolCallId: interrupt.toolCallId, content: result.content });
}

await refuse("deploy the release", { status: "resolved", payload: { approved: false, reason: "Not today." } });
await refuse("ask the operator which environment", { status: "cancelled" });

const calls = agent.messages.flatMap((m) => m.toolCalls ?? []).map((call) => call.id);
const answered = new Set(agent.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
assert.deepEqual(calls.filter((id) => !answered.has(id)), [], "every tool call has a result");
process.stdout.write(JSON.stringify({ refused }));
