package engine

import (
	"fmt"
	"strings"

	"github.com/decreehq/decree/pkg/tree"
)

// ProcessInstruction asks a process step for its JSON answer.
const ProcessInstruction = "When you are done, reply with only a JSON object with the keys " +
	"completed (boolean: true only if you did everything asked), secs_taken (number), " +
	"tokens_used (number) and comments (array of strings)."

// ValidationInstruction asks a validation call for its JSON answer.
const ValidationInstruction = "Reply with only a JSON object with the keys fully_completed (boolean), " +
	"partially_completed (boolean), should_retry (boolean) and warnings (array of strings: what is missing or wrong)."

// DecisionInstruction asks a decision step for its JSON answer and names
// the route labels to choose from.
func DecisionInstruction(labels []string) string {
	q := make([]string, len(labels))
	for i, l := range labels {
		q[i] = fmt.Sprintf("%q", l)
	}
	return "Answer by choosing exactly one of: " + strings.Join(q, ", ") + ". " +
		"Reply with only a JSON object with the keys choices (array of strings: the options above), " +
		"answer (string: exactly one of the options above, spelled as given) and reasons (array of strings)."
}

// instruction is the response-type instruction of a step.
func instruction(s *tree.Step) string {
	if s.Kind == tree.KindDecision {
		return DecisionInstruction(s.Labels())
	}
	return ProcessInstruction
}

// runPrompt is a step's prompt with its instruction.
func runPrompt(prompt, instr string) string {
	return prompt + "\n\n" + instr
}

// retryPrompt is the prompt plus every earlier critique, then the
// instruction.
func retryPrompt(prompt string, critiques []string, instr string) string {
	var b strings.Builder
	b.WriteString(prompt)
	b.WriteString("\n\nEarlier attempts at this task did not pass review. Address every point below.")
	for i, c := range critiques {
		fmt.Fprintf(&b, "\n\nPrevious validation feedback (attempt %d):\n%s", i+1, c)
	}
	b.WriteString("\n\n")
	b.WriteString(instr)
	return b.String()
}

// answerLimit caps how much of an answer a validation prompt quotes.
const answerLimit = 32 << 10

// validatePrompt asks the validating CLI to judge an answer.
func validatePrompt(s *tree.Step, prompt, answer string) string {
	if len(answer) > answerLimit {
		answer = "[... earlier output left out ...]\n" + answer[len(answer)-answerLimit:]
	}
	return s.ValidatePrompt + "\n\nThe task given to the agent:\n" + prompt +
		"\n\nThe agent's answer:\n" + strings.TrimSpace(answer) + "\n\n" + ValidationInstruction
}

// critique turns a failed validation into feedback for the retry prompt.
func critique(v Validation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Validation did not pass (fully_completed: false, partially_completed: %t, should_retry: %t).", v.PartiallyCompleted, v.ShouldRetry)
	for _, w := range v.Warnings {
		b.WriteString("\n- ")
		b.WriteString(w)
	}
	return b.String()
}

// incomplete is the feedback when the agent itself says it did not finish.
func incomplete(p Process) string {
	var b strings.Builder
	b.WriteString("The agent reported that it did not complete the task (completed: false).")
	for _, c := range p.Comments {
		b.WriteString("\n- ")
		b.WriteString(c)
	}
	return b.String()
}
