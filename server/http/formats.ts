/**
 * Formats the validator checks more strictly than ajv-formats' "fast" mode
 * (a signed URL must never carry a forged host). Fast `uri` is "a scheme, then no whitespace", so a signed URL built
 * from `Host: a"b` (`http://a"b/files/…`) passed response validation. A `uri` here
 * is RFC 3986's character set (unreserved, reserved and percent signs) and must
 * parse as a URL.
 */
const URI = /^[a-z][a-z0-9+.-]*:[a-z0-9\-._~:/?#[\]@!$&'()*+,;=%]*$/i;

/** `format: uri` (the contract's signed output URLs). */
export function isUri(value: string): boolean {
  return URI.test(value) && URL.canParse(value);
}

/** For express-openapi-validator's `formats` option: these replace ajv-formats' fast ones. */
export const STRICT_FORMATS = { uri: isUri };
