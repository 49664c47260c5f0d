// Checks AG-UI event streams with the official client (check.mjs). Input on stdin: a JSON object of stream
// name -> list of events (wire JSON). Output: one JSON object of stream name -> list of errors (empty when it
// passed).
import { readFileSync } from "node:fs";
import { check } from "./check.mjs";

const streams = JSON.parse(readFileSync(0, "utf8"));
const report = {};
for (const [name, events] of Object.entries(streams)) report[name] = await check(events);
process.stdout.write(JSON.stringify(report));
