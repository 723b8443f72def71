/**
 * Letters the `obscenity` confusables table leaves alone but a reader sees as
 * plain Latin, and fillers that show nothing. The table is compact and built by
 * hand: no well-kept npm package ships Unicode's confusables.txt, so each pair
 * below was checked against its Unicode name and against what fold() gave
 * before (only letters it left unread are listed). Keys are lower case, since
 * fold() lower-cases first (Cherokee capitals lower-case to the small letters
 * of U+AB70–U+ABBF, which no table held).
 */

/** Look-alike (lower case) → the Latin letter a reader sees. */
export const LOOK_ALIKES = new Map<string, string>(
  Object.entries({
    ꮟ: 'b', // CHEROKEE SMALL LETTER SI (Ꮟ)
    ꮷ: 'd', // CHEROKEE SMALL LETTER TSU (Ꮷ)
    ꬲ: 'e', // LATIN SMALL LETTER BLACKLETTER E
    ẝ: 'f', // LATIN SMALL LETTER LONG S WITH HIGH STROKE
    ᶃ: 'g', // LATIN SMALL LETTER G WITH PALATAL HOOK
    ƍ: 'g', // LATIN SMALL LETTER TURNED DELTA
    ꮒ: 'h', // CHEROKEE SMALL LETTER NI (Ꮒ)
    ꙇ: 'i', // CYRILLIC SMALL LETTER IOTA
    ꭵ: 'i', // CHEROKEE SMALL LETTER V (Ꭵ)
    ꭻ: 'j', // CHEROKEE SMALL LETTER GU (Ꭻ)
    ꓙ: 'j', // LISU LETTER JA
    ꮶ: 'k', // CHEROKEE SMALL LETTER TSO (Ꮶ)
    ꓲ: 'l', // LISU LETTER I (a capital I, which reads as l or i: leetspeak picks)
    ꮇ: 'm', // CHEROKEE SMALL LETTER LU (Ꮇ)
    ჿ: 'o', // GEORGIAN LETTER LABIAL SIGN
    ⲣ: 'p', // COPTIC SMALL LETTER RO
    ⲅ: 'r', // COPTIC SMALL LETTER GAMMA
    ꭇ: 'r', // LATIN SMALL LETTER R WITHOUT HANDLE
    ꮩ: 'v', // CHEROKEE SMALL LETTER DO (Ꮩ)
  }),
);

/**
 * Letters (not format characters, so `\p{Cf}` misses them) that draw nothing: the
 * Hangul fillers U+115F, U+1160, U+3164 and U+FFA0 (NFKC turns the last two into
 * U+1160), and the braille blank U+2800. Inside a word they hide it ("ki\u3164ll").
 */
export const INVISIBLE_LETTERS = /[\u115F\u1160\u3164\uFFA0\u2800]+/gu;
