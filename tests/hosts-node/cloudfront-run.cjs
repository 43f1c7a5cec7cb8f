// Run a CloudFront Function on CloudFront-shaped events, in node:
//
//   node cloudfront-run.cjs FUNCTION.js < EVENTS.json > RESULTS.json
//
// Each event runs in a fresh context holding only the function's code, as
// CloudFront runs it (no require, no process, no timers): what it returns (a
// request or a response) is printed as JSON, one result per event, in order.
"use strict";
const fs = require("node:fs");
const vm = require("node:vm");

const code = fs.readFileSync(process.argv[2], "utf-8");
const events = JSON.parse(fs.readFileSync(0, "utf-8"));
const results = events.map((event) => {
  const context = vm.createContext({});
  vm.runInContext(code, context, { filename: process.argv[2] });
  context.event = event;
  return vm.runInContext("handler(event)", context, { timeout: 1000 });
});
process.stdout.write(JSON.stringify(results));
