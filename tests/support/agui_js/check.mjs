// One AG-UI event stream checked by the official client: each event against the @ag-ui/core schema, the
// sequence through @ag-ui/client's verifyEvents. Returns the errors (none when it passed).
import { verifyEvents } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";
import { from, lastValueFrom } from "rxjs";

export async function check(events) {
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
