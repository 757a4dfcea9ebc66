'use strict';
// What `npm install` runs: places the native addon beside index.js as wattline.node.
// A package from `scripts/dist.sh` carries it prebuilt for one platform
// (prebuilt/PLATFORM-ARCH/); anywhere else the addon is built from the Rust sources
// (the package's rust/ folder, or this checkout) with cargo, in release, which needs
// a Rust toolchain. Which of the two happened is said in one line.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const platform = `${process.platform}-${process.arch}`;
const destination = path.join(__dirname, 'wattline.node');

// A prebuilt Linux addon links glibc: not for a musl system.
function glibc() {
  if (process.platform !== 'linux') return true;
  const header = process.report && process.report.getReport().header;
  return Boolean(header && header.glibcVersionRuntime);
}

const prebuilt = path.join(__dirname, 'prebuilt', platform, 'wattline.node');
if (fs.existsSync(prebuilt) && glibc()) {
  fs.copyFileSync(prebuilt, destination);
  console.log(`wattline: installed the prebuilt addon for ${platform}`);
  return;
}

const packaged = path.join(__dirname, 'rust', 'node', 'Cargo.toml');
const manifest = fs.existsSync(packaged) ? packaged : path.join(__dirname, 'Cargo.toml');
if (fs.existsSync(path.join(__dirname, 'prebuilt'))) {
  console.log(`wattline: no prebuilt addon for ${platform}: building it from source with cargo (needs a Rust toolchain)`);
}
const metadata = JSON.parse(
  execFileSync('cargo', ['metadata', '--format-version', '1', '--no-deps', '--manifest-path', manifest], { encoding: 'utf8' }),
);
execFileSync('cargo', ['build', '--release', '--manifest-path', manifest], { stdio: 'inherit' });
const library = { linux: 'libwattline_node.so', darwin: 'libwattline_node.dylib', win32: 'wattline_node.dll' }[process.platform];
if (!library) throw new Error(`wattline: no native build for ${process.platform}`);
fs.copyFileSync(path.join(metadata.target_directory, 'release', library), destination);
console.log('wattline: built wattline.node');
