// Restore: the exact key, else the newest saved key that starts with a restore key (in order).
const fs = require('fs');
const path = require('path');
const store = path.join(process.env.STANDIN_STORE, 'cache');
const key = process.env['INPUT_KEY'];
const target = path.resolve(process.env['INPUT_PATH']);
const prefixes = (process.env['INPUT_RESTORE-KEYS'] || '').split('\n').map((s) => s.trim()).filter(Boolean);
const saved = fs.existsSync(store) ? fs.readdirSync(store) : [];
let hit = saved.includes(key) ? key : undefined;
if (!hit) {
  for (const prefix of prefixes) {
    const matches = saved.filter((k) => k.startsWith(prefix));
    matches.sort((a, b) => fs.statSync(path.join(store, b)).mtimeMs - fs.statSync(path.join(store, a)).mtimeMs);
    if (matches.length) { hit = matches[0]; break; }
  }
}
if (hit) {
  fs.mkdirSync(target, { recursive: true });
  fs.cpSync(path.join(store, hit), target, { recursive: true });
  console.log(`cache restored from key: ${hit}`);
} else {
  console.log(`cache not found for key: ${key}`);
}
fs.appendFileSync(process.env.GITHUB_OUTPUT, `cache-hit=${hit === key}\n`);
fs.appendFileSync(process.env.GITHUB_STATE, `hit=${hit || ''}\n`);
