/* global process */
/*
 * Runs before every npm script (package.json). tracklane runs its .ts files directly,
 * which needs Node >= 22.18 (type stripping); an older Node fails further on with a
 * syntax error that does not say so. Plain ES5 CommonJS on purpose: it must itself run on
 * any Node, however old.
 */
"use strict";

// package.json "engines" says the same (a test keeps the two equal).
var MINIMUM = [22, 18, 0];

function parse(version) {
  var parts = String(version).replace(/^v/, "").split(".");
  return [Number(parts[0]) || 0, Number(parts[1]) || 0, Number(parts[2]) || 0];
}

function atLeast(found, minimum) {
  for (var i = 0; i < 3; i++) {
    if (found[i] !== minimum[i]) return found[i] > minimum[i];
  }
  return true;
}

var found = process.versions.node;

if (!atLeast(parse(found), MINIMUM)) {
  process.stderr.write(
    "tracklane needs Node.js " + MINIMUM.join(".") + " or newer but found " + found +
      " at " + process.execPath +
      "; install Node 24 with `nvm install` in this folder (it reads .nvmrc), or with" +
      " `npm install --prefix ~/.cache/node24 node@24` and put ~/.cache/node24/node_modules/.bin" +
      " first on PATH.\n"
  );
  process.exit(1);
}
