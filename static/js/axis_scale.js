// The scale of the time axis: execution time (ms from the execution's first event) to a place on the axis
// (0 at the start, 1 at the end), and the ruler's ticks. Runs are always to scale; a wait far longer than the
// runs around it is drawn shorter (compressed) so the runs stay readable, and says so. No DOM.

// Tick steps a person reads at a glance.
const STEPS_MS = [
  10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 900_000,
  1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000, 86_400_000,
];

export class AxisScale {
  // `pieces`: the axis in order, contiguous, [{from, to, wait}] in ms from the origin. A wait longer than the
  // cap (`compressMinMs`, or `compressRatio` times all runs together if that is more) is drawn
  // cap × (1 + ln(length / cap)) long: far shorter, yet a longer wait still looks longer.
  constructor(pieces, { compressMinMs, compressRatio }) {
    const running = pieces.filter((piece) => !piece.wait).reduce((sum, piece) => sum + piece.to - piece.from, 0);
    const cap = Math.max(compressMinMs, running * compressRatio);
    let at = 0;
    this.pieces = pieces.map((piece) => {
      const length = piece.to - piece.from;
      const compressed = Boolean(piece.wait) && length > cap;
      const shown = compressed ? cap * (1 + Math.log(length / cap)) : length;
      const placed = { ...piece, compressed, start: at, shown };
      at += shown;
      return placed;
    });
    this.total = at;
  }

  // Where a time falls on the axis, 0..1.
  place(ms) {
    if (this.total <= 0) return 0;
    for (const piece of this.pieces) {
      if (ms > piece.to) continue;
      const within = piece.to > piece.from ? (Math.max(ms, piece.from) - piece.from) / (piece.to - piece.from) : 0;
      return (piece.start + within * piece.shown) / this.total;
    }
    return 1;
  }

  // Ticks at least `spacingPx` apart on an axis `widthPx` wide: round times in every piece drawn to scale, and
  // the time where the axis goes on after a compressed wait (so the true time is readable past the break).
  ticks(widthPx, spacingPx) {
    if (this.total <= 0 || widthPx <= 0) return [{ ms: 0, at: 0 }];
    const wanted = (spacingPx * this.total) / widthPx;
    const step = STEPS_MS.find((candidate) => candidate >= wanted) ?? Math.ceil(wanted / STEPS_MS.at(-1)) * STEPS_MS.at(-1);
    const candidates = [{ ms: 0, fixed: true }];
    this.pieces.forEach((piece, index) => {
      if (piece.compressed) return;
      if (this.pieces[index - 1]?.compressed) candidates.push({ ms: piece.from, fixed: true });
      for (let ms = Math.ceil(piece.from / step) * step; ms <= piece.to; ms += step) candidates.push({ ms, fixed: false });
    });
    const kept = [];
    for (const candidate of candidates.map((tick) => ({ ...tick, at: this.place(tick.ms) })).sort((a, b) => a.at - b.at)) {
      const last = kept.at(-1);
      if (last && (last.ms === candidate.ms || (candidate.at - last.at) * widthPx < spacingPx)) {
        if (candidate.fixed && !last.fixed) kept[kept.length - 1] = candidate;
        continue;
      }
      kept.push(candidate);
    }
    return kept.map(({ ms, at }) => ({ ms, at }));
  }
}

// A ruler label: "0 s", "50 ms", "1.5 s", "45 s", "2 min 33 s", "1 h 05 min".
export function axisTime(ms) {
  if (ms > 0 && ms < 1000) return `${Math.round(ms)} ms`;
  const seconds = ms / 1000;
  if (seconds < 60) return `${Number.isInteger(seconds) ? seconds : seconds.toFixed(1)} s`;
  const whole = Math.round(seconds);
  const minutes = Math.floor(whole / 60);
  const pad = (value) => String(value).padStart(2, "0");
  if (minutes < 60) return whole % 60 === 0 ? `${minutes} min` : `${minutes} min ${pad(whole % 60)} s`;
  return minutes % 60 === 0 ? `${Math.floor(minutes / 60)} h` : `${Math.floor(minutes / 60)} h ${pad(minutes % 60)} min`;
}
