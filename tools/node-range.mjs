// @ts-check

/**
 * Whether a Node version (`20.19.2`) is inside an `engines.node` range made of `^M.m.p` and `>=M` parts
 * joined by `||` (package.json's form): a `^` part holds its major line from its floor, a `>=` part every
 * version from its floor on. Plain code, so a Node too old for the rest of the project can run it.
 * @param {string} version
 * @param {string} range
 */
export function nodeInRange(version, range) {
  const [major = 0, minor = 0] = version.replace(/^v/, '').split('.').map(Number);
  return range.split('||').some((part) => {
    const m = /^(\^|>=)\s*(\d+)(?:\.(\d+))?/.exec(part.trim());
    if (!m) return false;
    const floorMajor = Number(m[2]);
    const floorMinor = Number(m[3] ?? 0);
    if (m[1] === '>=') return major > floorMajor || (major === floorMajor && minor >= floorMinor);
    return major === floorMajor && minor >= floorMinor;
  });
}
