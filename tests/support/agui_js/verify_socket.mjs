// Reads the Host's execution websocket as an AG-UI client of it would, and checks what it got with the official
// client (check.mjs). Input on stdin: a JSON object of execution name -> the text of every message the socket
// sent, in order. Pieces are joined, `events` batches unpacked; event frames of origin `host` (items the Host
// adds beside the runs, such as a decision) are left out; the rest is one AG-UI stream per lane (`run`) and
// one for the whole execution. Output: stream name ("<execution>, run <run_number>" or "<execution>, whole
// execution") -> list of errors (empty when it passed).
import { readFileSync } from "node:fs";
import { check } from "./check.mjs";

function messagesOf(texts) {
  const messages = [];
  const pieces = new Map();
  for (const text of texts) {
    const message = JSON.parse(text);
    if (message.type !== "piece") {
      messages.push(message);
      continue;
    }
    const parts = pieces.get(message.id) ?? [];
    parts[message.index] = message.data;
    pieces.set(message.id, parts);
    if (parts.filter((part) => part !== undefined).length === message.count) {
      pieces.delete(message.id);
      messages.push(JSON.parse(parts.join("")));
    }
  }
  return messages;
}

function eventFrames(messages) {
  return messages.flatMap((message) =>
    message.type === "events" ? message.events : message.type === "event" ? [message] : [],
  );
}

const executions = JSON.parse(readFileSync(0, "utf8"));
const report = {};
for (const [name, texts] of Object.entries(executions)) {
  const frames = eventFrames(messagesOf(texts)).filter((frame) => frame.origin !== "host");
  const lanes = new Map();
  for (const frame of frames) {
    const lane = `${name}, run ${frame.run_number}`;
    if (!lanes.has(lane)) lanes.set(lane, []);
    lanes.get(lane).push(frame.event);
  }
  for (const [lane, events] of lanes) report[lane] = await check(events);
  report[`${name}, whole execution`] = await check(frames.map((frame) => frame.event));
}
process.stdout.write(JSON.stringify(report));
