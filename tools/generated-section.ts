/*
 * Sections of the documentation generated from the code (the scopes table, the repository's layout, the
 * configuration table), each between a begin and an end marker. A generator writes them; a test fails
 * when the checked-in text differs, so the documents cannot drift from what they describe.
 */

/** `doc` with the text between `begin` and `end` (markers kept) replaced by `content`. */
export function withSection(doc: string, begin: string, end: string, content: string, name: string): string {
  const start = doc.indexOf(begin);
  const stop = doc.indexOf(end);
  if (start === -1 || stop === -1 || stop < start) throw new Error(`${name}: markers missing (${begin} ... ${end})`);
  return `${doc.slice(0, start)}${begin}\n${content}\n${end}${doc.slice(stop + end.length)}`;
}
