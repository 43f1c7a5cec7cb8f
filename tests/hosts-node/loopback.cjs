// Preloaded into `netlify dev` (NODE_OPTIONS=--require) by tests/hosts.py:
// every server that asks for all interfaces, or names none, listens on
// 127.0.0.1 instead, so the tests open no port beyond this machine.
"use strict";
const net = require("node:net");

const LOOPBACK = "127.0.0.1";
const ANYWHERE = new Set([undefined, null, "", "0.0.0.0", "::"]);
const listen = net.Server.prototype.listen;

net.Server.prototype.listen = function (...args) {
  const [first, second] = args;
  if (args.length === 0 || typeof first === "function") {
    args.unshift(0, LOOPBACK);
  } else if (first !== null && typeof first === "object" && !(first instanceof net.Server)
      && "port" in first && ANYWHERE.has(first.host)) {
    args[0] = { ...first, host: LOOPBACK };
  } else if ((typeof first === "number" || /^\d+$/.test(String(first ?? "")))
      && (typeof second !== "string" || ANYWHERE.has(second))) {
    args.splice(1, typeof second === "string" ? 1 : 0, LOOPBACK);
  }
  return listen.apply(this, args);
};
