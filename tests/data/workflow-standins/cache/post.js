// Save after the job, under the key, unless that key was restored (as actions/cache does).
const fs = require('fs');
const path = require('path');
const key = process.env['INPUT_KEY'];
const source = path.resolve(process.env['INPUT_PATH']);
if (process.env['STATE_hit'] === key) {
  console.log(`cache hit on the key ${key}: not saved`);
} else if (!fs.existsSync(source)) {
  console.log(`nothing to save at ${source}`);
} else {
  const dest = path.join(process.env.STANDIN_STORE, 'cache', key);
  fs.rmSync(dest, { recursive: true, force: true });
  fs.cpSync(source, dest, { recursive: true });
  console.log(`cache saved with key: ${key}`);
}
