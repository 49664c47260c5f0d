// Checks AG-UI event streams with the official client: each event against the @ag-ui/core schema, each
// stream through @ag-ui/client's verifyEvents. Input on stdin: a JSON object of stream name -> list of
// events (wire JSON). Output: one JSON object of stream name -> list of errors (empty when it passed).
import { readFileSync } from "node:fs";
import { verifyEvents } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";
import { from, lastValueFrom } from "rxjs";

async function check(events) {
  const errors = [];
  events.forEach((event, index) => {
    const parsed = EventSchemas.safeParse(event);
    if (!parsed.success) errors.push(`schema: event ${index} (${event.type}): ${parsed.error.message}`);
  });
  try {
    await lastValueFrom(from(events).pipe(verifyEvents(false)), { defaultValue: null });
  } catch (error) {
    errors.push(`sequence: ${error.message}`);
  }
  return errors;
}

const streams = JSON.parse(readFileSync(0, "utf8"));
const report = {};
for (const [name, events] of Object.entries(streams)) report[name] = await check(events);
process.stdout.write(JSON.stringify(report));
