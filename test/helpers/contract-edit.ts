/**
 * A contract edit as a designer makes one: a new GET operation (read scope,
 * 200 and 401) added at the top of `paths:`. Used by the dev-loop test and by
 * `npm run bench:dev`, which time how long such an edit takes to go live.
 */
export function withOperation(contract: string, op: { path: string; operationId: string; summary: string }): string {
  const operation = [
    `  ${op.path}:`,
    '    get:',
    `      operationId: ${op.operationId}`,
    `      summary: ${op.summary}`,
    '      security:',
    '        - bearerAuth: [read]',
    '      responses:',
    "        '200':",
    '          description: Never served.',
    "        '401':",
    "          $ref: '#/components/responses/Unauthorized'",
    '',
  ].join('\n');
  return contract.replace(/^paths:\n/m, `paths:\n${operation}`);
}
