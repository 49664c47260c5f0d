// A websocket that reconnects with exponential backoff (plus jitter) until told to stop.
// Close codes the server uses to mean "do not retry" (not logged in, no such execution) come from the server's
// protocol (runs/protocol.py) in the page's socket-protocol json_script. Any other close (the server's replay
// failed; a restart; a network drop) reconnects.
// A handshake the server never answers (its consumer died before accepting, e.g. while Redis was down) is given
// up after OPEN_TIMEOUT_MS and retried like a close, so a page never waits forever on one attempt.
// A message over the transport's 1 MiB limit arrives as {"type": "piece", id, index, count, data} messages
// (runs/protocol.py); they are joined in order and handled as the one message they carry.

const PROTOCOL = JSON.parse(document.getElementById("socket-protocol").textContent);
const FINAL_CLOSE_CODES = new Set(PROTOCOL.finalCloseCodes);
const BASE_DELAY_MS = 400;
const MAX_DELAY_MS = 8000;
const OPEN_TIMEOUT_MS = 10000;

export class ReconnectingSocket {
  constructor(path, { onOpen, onMessage, onState }) {
    this.url = `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}${path}`;
    this.onOpen = onOpen;
    this.onMessage = onMessage;
    this.onState = onState;
    this.attempt = 0;
    this.stopped = false;
    this.socket = null;
    this.timer = null;
    this.pieces = new Map();
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.socket) this.socket.close();
  }

  // Close now and reconnect at once (used after the server rejected our cursor and we reset it).
  restart() {
    this.attempt = 0;
    if (this.socket) {
      this.socket.onclose = null;
      this.socket.close();
    }
    this.connect();
  }

  send(message) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(message));
  }

  connect() {
    clearTimeout(this.timer);
    this.onState(this.attempt === 0 ? "connecting" : "reconnecting");
    const socket = new WebSocket(this.url);
    this.socket = socket;
    const opening = setTimeout(() => {
      if (socket.readyState === WebSocket.CONNECTING) socket.close();
    }, OPEN_TIMEOUT_MS);
    socket.onopen = () => {
      clearTimeout(opening);
      this.attempt = 0;
      this.onOpen();
    };
    this.pieces.clear();
    socket.onmessage = (message) => {
      let data;
      try {
        data = JSON.parse(message.data);
        if (data.type === "piece") data = this.join(data);
      } catch {
        return;
      }
      if (data !== null) this.onMessage(data);
    };
    socket.onclose = (event) => {
      clearTimeout(opening);
      if (this.socket !== socket) return;
      this.socket = null;
      if (this.stopped) return;
      if (FINAL_CLOSE_CODES.has(event.code)) {
        this.onState(event.code === PROTOCOL.unauthenticated ? "logged-out" : "gone");
        return;
      }
      this.scheduleReconnect();
    };
  }

  // The whole message once its last piece arrived, else null.
  join(piece) {
    const parts = this.pieces.get(piece.id) ?? [];
    parts[piece.index] = piece.data;
    if (parts.filter((part) => part !== undefined).length < piece.count) {
      this.pieces.set(piece.id, parts);
      return null;
    }
    this.pieces.delete(piece.id);
    return JSON.parse(parts.join(""));
  }

  scheduleReconnect() {
    const delay = Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** this.attempt) * (0.75 + Math.random() / 2);
    this.attempt += 1;
    this.onState("reconnecting");
    this.timer = setTimeout(() => this.connect(), delay);
  }
}
