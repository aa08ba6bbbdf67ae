;;; eglot-session.el --- Emacs' own LSP client, eglot, on gateway-ls  -*- lexical-binding: t -*-

;; Run by tests/clients/test_emacs_eglot.py as `emacs --batch -l eglot-session.el`.  First the
;; set-up a user would write (gateway-ls as the server for Python), then what a person does: open
;; the file, connect with M-x eglot, type at the end of a line and ask for completion with
;; M-x completion-at-point; then list the code actions on the buffer and run `gatewayLs.status'.
;; The test passes the server command and the scenario in environment variables and reads back
;; the JSON written at the end.

(require 'json)
(package-activate-all)                  ; Emacs before 29: eglot from Debian's elpa-eglot
(require 'eglot)

(add-to-list 'eglot-server-programs
             `(python-mode . ,(json-parse-string (getenv "GATEWAY_LS_COMMAND")
                                                 :array-type 'list)))

(defun gateway-test-wait (done what)
  "Let eglot's process work until DONE returns non-nil; fail naming WHAT after 30 s."
  (let ((deadline (+ (float-time) 30)))
    (while (not (funcall done))
      (when (> (float-time) deadline)
        (error "Timed out waiting for %s" what))
      (accept-process-output nil 0.05))))

(defun gateway-test-candidates ()
  "The candidates eglot offers at point, as a completion UI lists them."
  (pcase-let ((`(,start ,end ,table . ,_) (eglot-completion-at-point)))
    (all-completions (buffer-substring-no-properties start end) table)))

(find-file (getenv "GATEWAY_TEST_FILE"))
(call-interactively #'eglot)
(gateway-test-wait (lambda () eglot--managed-mode) "eglot to manage the buffer")

(goto-char (point-min))
(forward-line (1- (string-to-number (getenv "GATEWAY_TEST_LINE"))))
(end-of-line)
(insert (getenv "GATEWAY_TEST_TYPED"))
(let ((candidates (gateway-test-candidates)))
  (completion-at-point)
  (let* ((text (buffer-substring-no-properties (point-min) (point-max)))
         (server (eglot-current-server))
         (actions (eglot-code-actions (point-min) (point-max)))
         (status (eglot-execute-command server "gatewayLs.status" [])))
    (with-temp-file (getenv "GATEWAY_TEST_RESULT")
      (insert (json-encode
               `((buffer . ,text)
                 (candidates . ,(vconcat candidates))
                 (code_actions . ,(vconcat (mapcar (lambda (action) (plist-get action :title))
                                                   actions)))
                 (status . ,status)))))))

(eglot-shutdown (eglot-current-server))
(kill-emacs 0)
