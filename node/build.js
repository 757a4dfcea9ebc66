'use strict';
// Builds the native addon with cargo (release) and places it beside index.js as
// wattline.node: what `npm install ./node` runs. Needs a Rust toolchain.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const manifest = path.join(__dirname, 'Cargo.toml');
const metadata = JSON.parse(
  execFileSync('cargo', ['metadata', '--format-version', '1', '--no-deps', '--manifest-path', manifest], { encoding: 'utf8' }),
);
execFileSync('cargo', ['build', '--release', '--manifest-path', manifest], { stdio: 'inherit' });
const library = { linux: 'libwattline_node.so', darwin: 'libwattline_node.dylib', win32: 'wattline_node.dll' }[process.platform];
if (!library) throw new Error(`wattline: no native build for ${process.platform}`);
fs.copyFileSync(path.join(metadata.target_directory, 'release', library), path.join(__dirname, 'wattline.node'));
console.log('wattline: built wattline.node');
