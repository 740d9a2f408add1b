function expect_error(name, f)
%EXPECT_ERROR  Run f(); print "CASE name | identifier | message" (or "| none |" without an error).
try
  f();
  printf('CASE %s | none | no error\n', name);
catch err
  printf('CASE %s | %s | %s\n', name, err.identifier, strrep(err.message, sprintf('\n'), ' '));
end
fflush(stdout);
end
