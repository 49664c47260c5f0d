// Drives the Host's AG-UI endpoint with the official HttpAgent: a lookup, a deploy that is interrupted and
// resumed with an approval, then a question that is answered. Arguments: base URL, API token, thread id.
// Prints a JSON summary; any failed expectation (or an event stream verifyEvents rejects) exits non-zero.
import assert from "node:assert/strict";
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [baseUrl, token, threadId] = process.argv.slice(2);
const agent = new HttpAgent({
  url: `${baseUrl}/agui/demo/`,
  headers: { Authorization: `Bearer ${token}` },
  threadId,
});
const summary = [];

async function run(label, options) {
  const types = [];
  let finished;
  await agent.runAgent(options, {
    onEvent: ({ event }) => {
      types.push(event.type);
    },
    onRunFinishedEvent: ({ event }) => {
      finished = event;
    },
  });
  const outcome = finished?.outcome?.type;
  summary.push({ label, outcome, types, interrupts: agent.pendingInterrupts });
  return outcome;
}

function say(text) {
  agent.addMessage({ id: `user-${agent.messages.length}`, role: "user", content: text });
}

say("look up REC-42");
assert.equal(await run("lookup"), "success");
const lookupResult = agent.messages.find((m) => m.role === "tool" && String(m.content).includes("REC-42"));
assert.ok(lookupResult, "the lookup's tool result is in the agent's messages");

say("deploy the release");
assert.equal(await run("deploy"), "interrupt");
const [approval] = agent.pendingInterrupts;
assert.equal(agent.pendingInterrupts.length, 1);
assert.equal(approval.reason, "approval");
assert.ok(approval.responseSchema.properties.approved, "the interrupt says how to answer it");
const resume = buildResumeArray(agent.pendingInterrupts, {
  [approval.id]: { status: "resolved", payload: { approved: true } },
});
assert.equal(await run("deploy approved", { resume }), "success");
assert.deepEqual(agent.pendingInterrupts, []);

say("ask the operator which environment");
assert.equal(await run("question"), "interrupt");
const [question] = agent.pendingInterrupts;
assert.equal(question.reason, "question");
const answer = buildResumeArray(agent.pendingInterrupts, {
  [question.id]: { status: "resolved", payload: { answer: "production" } },
});
assert.equal(await run("question answered", { resume: answer }), "success");

const toolCalls = agent.messages.flatMap((m) => m.toolCalls ?? []).map((call) => call.id);
assert.equal(new Set(toolCalls).size, toolCalls.length, "tool call ids are unique in the conversation");
process.stdout.write(JSON.stringify({ runs: summary, messages: agent.messages.length, approval, question }));
