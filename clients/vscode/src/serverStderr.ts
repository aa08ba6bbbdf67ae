/**
 * The server's stderr lines, each with the log level it was written at.
 *
 * The server logs through `window/logMessage` while an editor is connected; stderr carries what
 * comes before (start-up, loading progress) and after (a crash). vscode-languageclient would show
 * every stderr line as an error; here a Python logging line keeps its own level (and loses the
 * timestamp the output channel adds anyway), a traceback is an error, and anything else is info.
 */
export type LogLevel = "debug" | "info" | "warn" | "error";

export interface StderrLine {
  readonly level: LogLevel;
  readonly text: string;
}

const PYTHON_LEVELS: Readonly<Record<string, LogLevel>> = {
  DEBUG: "debug",
  INFO: "info",
  WARNING: "warn",
  ERROR: "error",
  CRITICAL: "error",
};

/** `2026-01-02 10:00:00,123 WARNING name: message` (the server's format) or `WARNING:name:message`. */
const LOGGING_LINE =
  /^(?:\d{4}-\d\d-\d\d[ T][\d:.,]+ )?(DEBUG|INFO|WARNING|ERROR|CRITICAL)(?: |:)(.*)$/;
const TRACEBACK = /^Traceback \(most recent call last\):/;
/** argparse's `prog: error: message`, and the like. */
const COMMAND_ERROR = /^[\w.-]+: error: /;

/** Classifies one stream's lines; lines continuing a message (indented) keep its level. */
export class StderrClassifier {
  private current: LogLevel = "info";
  private inTraceback = false;

  classify(line: string): StderrLine {
    const logging = LOGGING_LINE.exec(line);
    if (logging) {
      this.inTraceback = false;
      this.current = PYTHON_LEVELS[logging[1] ?? ""] ?? "info";
      return { level: this.current, text: (logging[2] ?? "").trimStart() };
    }
    if (TRACEBACK.test(line)) {
      this.inTraceback = true;
      this.current = "error";
      return { level: "error", text: line };
    }
    if (/^\s/.test(line) || line === "") {
      return { level: this.current, text: line };
    }
    if (this.inTraceback) {
      // The exception's own line ends the traceback.
      this.inTraceback = false;
      return { level: "error", text: line };
    }
    this.current = COMMAND_ERROR.test(line) ? "error" : "info";
    return { level: this.current, text: line };
  }
}
