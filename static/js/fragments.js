// Reassembly of an oversized CUSTOM event sent as `a13n.stream.fragment` events.

export class FragmentAssembler {
  constructor() {
    this.parts = new Map(); // fragment id -> its parts so far (null where one is missing)
  }

  clear() {
    this.parts.clear();
  }

  // The original CUSTOM event once all fragments of `value.id` are in (null before, or if they do not parse).
  add(value) {
    let parts = this.parts.get(value.id);
    if (!parts) {
      parts = new Array(value.count).fill(null);
      this.parts.set(value.id, parts);
    }
    parts[value.index] = value.data;
    if (parts.some((part) => part === null)) return null;
    this.parts.delete(value.id);
    try {
      const event = JSON.parse(parts.join(""));
      return { name: event.name, value: event.value, note: `reassembled from ${parts.length} fragments` };
    } catch {
      return null;
    }
  }
}
